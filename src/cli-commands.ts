import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { usageErrorText, type CliCommand } from './cli-args.js'
import type { GatewayConfig } from './config/schema.js'
import type { ExplainInput, Explanation } from './plan/explain-request.js'
import type { HeldSignals } from './held-signals.js'

// Each command imports what it needs when it runs: `v4gw fingerprint` or `check-config` should not
// pay for loading fastify, undici and OpenTelemetry (a second and more on a busy machine), which
// only `run` and the simulators use.

const USAGE = `Usage:
  v4gw [--config FILE]                 run the gateway (default: $V4GW_CONFIG or config/gateway.yaml)
  v4gw check-config FILE               validate a config file and print a summary
  v4gw explain --config FILE [--tenant T] METHOD PATH [--header K:V]... [--body JSON] [--at INSTANT] [--client ID]
                                       print the V4 call(s) a request would become and the side that serves it; sends nothing
  v4gw simulator [--host H] [--port N] run the built-in V4 simulator alone (default 127.0.0.1:4010)
  v4gw legacy-simulator [--host H] [--port N]
                                       run the built-in legacy backend alone (default 127.0.0.1:4011)
  v4gw config-schema                   print the config's JSON Schema (config.schema.json)
  v4gw fingerprint [--header]          print the client id of a credential (or header value) read from stdin
  v4gw healthcheck [--config FILE]     exit 0 if the admin listener's /healthz answers 200 within 2 s, else 1
  v4gw report --admin URL [--tenant T] [--format md|csv|json]
                                       print who still calls legacy routes (/admin/migration)
  v4gw sunset-check --admin URL --tenant T [--route "METHOD /path"] [--quiet-days N] [--single-replica]
                                       exit 0 only when no client that is not exempt called in N days
  v4gw calendar --config FILE [--tenant T] [--format ics|md]
                                       print the brownout windows and sunsets of a config
  (report and sunset-check read the admin token from --token-file FILE or $V4GW_ADMIN_TOKEN)
  v4gw [COMMAND] --help | v4gw --version

Exit codes: 0 ok, 1 failure, 2 invalid config, 64 usage error.`

/** The help of a command that has its own (`v4gw COMMAND --help`); the others print USAGE. */
const COMMAND_HELP: Readonly<Record<string, string>> = {
  'check-config': `Usage: v4gw check-config FILE

Validates a config file as the gateway reads it when it starts: YAML, or JSON for a FILE ending
in .json, with \${NAME} and \${NAME:-default} taken from this environment. A valid file gets a
summary (the listeners, each tenant's upstream and legacy routes) on stdout; an invalid one gets
every problem, each with its path, on stderr. Every key: docs/config.md.

Exit codes: 0 valid, 2 invalid config, 64 usage error.`,
  report: `Usage: v4gw report --admin URL [--tenant T] [--format md|csv|json] [--token-file FILE]

Prints SPEC 12's client registry from the admin listener at URL (GET /admin/migration, up to
10,000 clients per route): md (default) a status update per tenant (the legacy share per UTC
day, the legacy routes, the clients still calling, most recent first), csv one row per client
(a cell starting with = + - @ tab or CR prefixed with '), json the answer as it is. The admin
token comes from --token-file FILE (its first line) or $V4GW_ADMIN_TOKEN, never an argument.

Exit codes: 0 printed, 1 the admin API could not be reached or refused, 64 usage error.`,
  'sunset-check': `Usage: v4gw sunset-check --admin URL --tenant T [--route "METHOD /path"] [--quiet-days N] [--single-replica] [--token-file FILE]

Tells whether a legacy route (or every route of T) can be switched off (SPEC 12), for a CI step
before a config that retires it is merged. N defaults to 14 days. The admin token comes from
--token-file FILE or $V4GW_ADMIN_TOKEN, never an argument.

Exit codes:
  0  complete evidence that no client that is not exempt called in the last N days: the answer
     covers every replica (scope fleet; scope replica only with --single-replica, the operator
     vouching there is one process), its data is complete since at least N days ago, and each
     route's lastSeenNonExempt is older than N days or null
  1  a client that is not exempt called in the last N days, whatever the scope; they are listed
  2  it cannot tell, and says why: scope local (the store is down), data complete for less than
     N days, an unknown tenant or route, the admin API unreachable or refusing
  64 usage error`,
  calendar: `Usage: v4gw calendar --config FILE [--tenant T] [--format ics|md]

Prints every brownout window and sunset of the config (SPEC 13) for the announcement to clients:
ics (default) an iCalendar file (RFC 5545: one VEVENT per window, UTC times, CRLF line ends,
long lines folded), md a Markdown table. A route with its own deprecation is listed apart.

Exit codes: 0 printed, 2 invalid config, 64 usage error.`,
  fingerprint: `Usage: v4gw fingerprint [--header] < FILE

Prints the client id the gateway computes (SPEC 12), for an exempt or labels entry. It reads one
line from standard input, never from an argument, so a credential stays out of shell history and
process lists: type it and press Ctrl-D, or pipe it (printf '%s' "$TOKEN" | v4gw fingerprint).
One trailing newline is removed. Without --header the line is a credential as a legacy client
sends it (a leading "Bearer " or "Token " in any case is removed): fp: and 16 hex digits of its
SHA-256. With --header it is the value of a clients.key header, as it is: hdr:<value>, or hdr#
and 16 hex digits for a value that is not 1-128 of [A-Za-z0-9._:-]. Prints only the id.

Exit codes: 0 printed, 2 a line that is empty or holds whitespace or control characters, 64 usage error.`
}

function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
  return manifest.version
}

async function runSimulatorCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '4010' } } })
  // A standalone process: nothing reads its recorded calls, which would only grow.
  const port = values.port.trim() === '' ? Number.NaN : Number(values.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError('--port must be a port number from 0 to 65535')
  const { createSimulator } = await import('./simulator/index.js')
  const simulator = createSimulator({ logger: true, recordCalls: false })
  const url = await simulator.listen({ host: values.host, port })
  console.log(`v4 simulator listening on ${url}`)
  const stop = (): void => {
    void simulator.close().then(() => process.exit(0))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

/** SPEC 14.1: the embedded legacy backend as a process of its own, for a legacy upstream outside the gateway. */
async function runLegacySimulatorCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '4011' } } })
  const port = values.port.trim() === '' ? Number.NaN : Number(values.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError('--port must be a port number from 0 to 65535')
  const { createLegacySimulator } = await import('./app/legacy-simulator.js')
  const backend = createLegacySimulator()
  const url = await backend.listen({ host: values.host, port })
  console.log(`legacy simulator listening on ${url}`)
  const stop = (): void => {
    void backend.close().then(() => process.exit(0))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
}

async function checkConfigCommand(args: string[]): Promise<void> {
  const { positionals } = parseArgs({ args, allowPositionals: true })
  const path = positionals[0]
  if (path === undefined || positionals.length > 1) throw new UsageError('check-config takes one FILE')
  const [{ loadConfig }, { describeDeprecation }, { EMBEDDED_UPSTREAM }, { selectUpstreamUrl }, { headerIdWarnings }, { routeSettingsLines }] = await Promise.all([
    import('./config/load-config.js'),
    import('./config/deprecation.js'),
    import('./config/schema.js'),
    import('./tenancy/tenant-runtime.js'),
    import('./config/header-id-warnings.js'),
    import('./route-settings-lines.js')
  ])
  const config = await loadConfig(path)
  console.log(`${path}: valid`)
  console.log(`  listen ${config.listen.host}:${config.listen.port}, admin ${config.admin.host}:${config.admin.port}${config.admin.token === null ? '' : ' (token set)'}`)
  for (const [name, tenant] of Object.entries(config.tenants)) {
    const url = selectUpstreamUrl(tenant)
    const origin = url === EMBEDDED_UPSTREAM ? 'built-in simulator' : new URL(url).origin
    const legacy = tenant.upstream.legacy == null ? '' : `, legacy ${tenant.upstream.legacy === EMBEDDED_UPSTREAM ? 'built-in legacy backend' : new URL(tenant.upstream.legacy).origin}`
    console.log(`  tenant ${name}: target ${tenant.upstream.target}, origin ${origin}${legacy}, fallback ${tenant.fallback}`)
    const now = Date.now()
    if (tenant.legacy.deprecation !== null) for (const line of describeDeprecation(tenant.legacy.deprecation, now)) console.log(`    ${line}`)
    const settings = routeSettingsLines(tenant, now)
    for (const route of tenant.legacy.routes) {
      const detail = route.action === 'proxy' ? ` -> ${route.rewrite ?? ''}` : route.stateKey === undefined ? '' : ` (state key ${route.stateKey})`
      console.log(`    ${route.method} ${route.path}: ${route.action}${detail}`)
      for (const line of settings.get(`${route.method} ${route.path}`) ?? []) console.log(`      ${line}`)
    }
  }
  // SPEC 12: a hdr: id is the client's own word; one that exempts or selects a client is worth a second look.
  for (const warning of headerIdWarnings(config)) console.log(`  warning: ${warning}`)
}

async function explainCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { config: { type: 'string', short: 'c' }, tenant: { type: 'string' }, header: { type: 'string', short: 'H', multiple: true }, body: { type: 'string' }, at: { type: 'string' }, client: { type: 'string' } }
  })
  const [method, path] = positionals
  if (method === undefined || path === undefined || positionals.length > 2) throw new UsageError('explain takes METHOD and PATH')
  // A header given twice is sent twice, as a client would (a second credential is a conflict).
  // No prototype: `-H "__proto__: x"` or `-H "constructor: x"` is a header like any other.
  const headers: Record<string, string[]> = Object.create(null) as Record<string, string[]>
  for (const header of values.header ?? []) {
    const colon = header.indexOf(':')
    // Its text is not repeated: a header given as `-H "Bearer …"` is a credential (SPEC 5).
    if (colon <= 0) throw new UsageError(`--header takes NAME:VALUE; one given has no name before a ":" (its text is not shown, it may be a credential)`)
    ;(headers[header.slice(0, colon).trim()] ??= []).push(header.slice(colon + 1).trim())
  }
  if (values.body !== undefined) {
    try {
      JSON.parse(values.body)
    } catch {
      throw new UsageError('--body must be JSON')
    }
  }
  if (values.at !== undefined && Number.isNaN(Date.parse(values.at))) throw new UsageError('--at takes an ISO 8601 instant such as 2027-03-02T14:30:00Z')
  const { loadConfig, resolveConfigPath } = await import('./config/load-config.js')
  const config = await loadConfig(resolveConfigPath(values.config))
  if (values.client !== undefined && !CLIENT_ID.test(values.client)) throw new UsageError('--client takes a client id: fp:<16 hex digits>, hdr:<id>, hdr#<16 hex digits> or anonymous')
  const input: ExplainInput = {
    method,
    path,
    headers,
    rawBody: values.body,
    tenant: values.tenant,
    ...(values.at === undefined ? {} : { at: values.at }),
    ...(values.client === undefined ? {} : { client: values.client })
  }
  const explanation = config.store.kind === 'redis' && config.store.redis.url !== null ? await explainWithStoreRecords(config, input) : await explainFromConfig(config, input)
  console.log(JSON.stringify(explanation, null, 2))
}

/** Nothing is started: an embedded upstream is shown by name. */
const EMBEDDED_ORIGINS = { simulator: 'http://embedded-simulator', legacy: 'http://embedded-legacy-backend' }

/**
 * With `store: memory` the fleet id is random per gateway process (SPEC 14) and the stage
 * overrides and brownout pauses live in it: this process can print neither (SPEC 9: a value
 * explain cannot know is a placeholder in parentheses).
 */
const UNKNOWN_FLEET_ID = "(the gateway process's fleet id)"

async function explainFromConfig(config: GatewayConfig, input: ExplainInput): Promise<Explanation> {
  const [{ buildGatewayRuntime }, { explainRequest }] = await Promise.all([import('./tenancy/gateway-runtime.js'), import('./plan/explain-request.js')])
  const explanation = explainRequest(buildGatewayRuntime(config, EMBEDDED_ORIGINS.simulator, { embeddedLegacyOrigin: EMBEDDED_ORIGINS.legacy, fleetId: UNKNOWN_FLEET_ID }), input)
  // Overrides and pauses decide legacy routes only (SPEC 13, 14).
  if (explanation.trafficClass === 'legacy') {
    console.error("v4gw explain: store memory: the running gateway's stage overrides and brownout pauses live in its process and are not shown; the config's decision is (POST /admin/explain reads them)")
  }
  return explanation
}

/**
 * With `store: redis` the fleet's records are read from Redis as the gateways read them: its
 * stage overrides and brownout pauses (SPEC 13, 14), which decide before the config does, and a
 * keyed request's record (SPEC 16: a GET, never a claim). With `store: memory` they live in the
 * gateway's process: `POST /admin/explain` reads them.
 */
async function explainWithStoreRecords(config: GatewayConfig, input: ExplainInput): Promise<Explanation> {
  const [{ buildGatewayRuntime }, { explainRequestWithRecords }, { createSharedStore }, { createSharedIdempotencyStore }, { BrownoutPauses }, { StageOverrideRecords }] = await Promise.all([
    import('./tenancy/gateway-runtime.js'),
    import('./plan/explain-request.js'),
    import('./store/shared-store.js'),
    import('./sessions/shared-idempotency-store.js'),
    import('./tenancy/brownout-pauses.js'),
    import('./tenancy/stage-override-records.js')
  ])
  const quiet = { info: () => undefined, warn: () => undefined }
  const shared = await createSharedStore({ kind: 'redis', url: config.store.redis.url, keyPrefix: config.store.redis.keyPrefix, logger: quiet })
  const brownoutPauses = new BrownoutPauses(shared)
  const stageOverrides = new StageOverrideRecords(shared)
  try {
    const read = await Promise.all([brownoutPauses.start(), stageOverrides.start()])
    // Down, or connected and hung past the command timeout: what the fleet has decided beyond
    // the config is unknown then, and said, rather than shown as the config's.
    if (!read.every(Boolean)) console.error("v4gw explain: store redis does not answer: the fleet's stage overrides and brownout pauses are unknown, the config's decision is shown")
    const runtime = buildGatewayRuntime(config, EMBEDDED_ORIGINS.simulator, { embeddedLegacyOrigin: EMBEDDED_ORIGINS.legacy, brownoutPauses, stageOverrides })
    return await explainRequestWithRecords(runtime, input, createSharedIdempotencyStore(shared))
  } finally {
    brownoutPauses.stop()
    stageOverrides.stop()
    await shared.close()
  }
}

async function runCommand(args: string[], held: HeldSignals | undefined): Promise<void> {
  const { values } = parseArgs({ args, options: { config: { type: 'string', short: 'c' } } })
  const [{ runGateway }, { resolveConfigPath }, { holdSignals }] = await Promise.all([import('./main.js'), import('./config/load-config.js'), import('./held-signals.js')])
  const running = await runGateway(resolveConfigPath(values.config), held ?? holdSignals())
  // Every bound address (SPEC 18); a listener on one address reads `URL (admin URL)`, as scripts expect.
  // The PID is the serving process's: on Node without process.execve, a launcher's child (node-flags.ts).
  console.log(`v4gw listening on ${running.trafficUrls.join(', ')} (admin ${running.adminUrls.join(', ')}) pid ${process.pid}`)
}

class UsageError extends Error {}

const writeOut = (text: string): void => void process.stdout.write(text)
const writeErr = (text: string): void => void process.stderr.write(text)

/** SPEC 12's client ids, as the config takes them. */
const CLIENT_ID = /^(?:fp:[0-9a-f]{16}|hdr:[A-Za-z0-9._:-]{1,128}|hdr#[0-9a-f]{16}|anonymous)$/

/** A credential's scheme as SPEC 5 reads it from `Authorization`. */
const CREDENTIAL_SCHEME = /^(?:bearer|token)[ \t]+/i

/**
 * SPEC 12's `v4gw fingerprint`: the client id of one line of standard input. Neither the line nor
 * an argument is ever echoed: a stray argument may be a credential typed in the wrong place.
 */
async function fingerprintCommand(args: string[]): Promise<void> {
  const header = args.length === 1 && args[0] === '--header'
  if (args.length > (header ? 1 : 0)) throw new UsageError('fingerprint takes only --header: the credential is read from standard input, never from an argument')
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  const line = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '')
  const value = header ? line : line.replace(CREDENTIAL_SCHEME, '')
  // SPEC 12: whitespace or control characters inside a credential (a second line among them): exit 2.
  const problem = value === '' ? 'is empty' : !header && /[\s\p{Cc}]/u.test(value) ? 'holds whitespace or control characters' : header && /[\r\n]/.test(value) ? 'holds more than one line' : undefined
  if (problem !== undefined) {
    console.error(`v4gw fingerprint: the ${header ? 'header value' : 'credential'} read from standard input ${problem}; nothing printed`)
    process.exitCode = 2
    return
  }
  const { credentialClientId, headerClientId } = await import('./credentials/client-id.js')
  console.log(header ? headerClientId(value, 'utf8') : credentialClientId(value))
}

/** A listener that cannot bind (a port in use, a privileged port, an address not here): its message says it all. */
/** A listener that could not open: its address taken or refused, or its host a name that does not resolve. */
function isListenError(error: unknown): error is NodeJS.ErrnoException {
  const syscall = error instanceof Error ? (error as NodeJS.ErrnoException).syscall : undefined
  return syscall === 'listen' || syscall === 'getaddrinfo'
}

async function dispatch(command: CliCommand, args: string[], held: HeldSignals | undefined): Promise<void> {
  if (typeof command === 'object') {
    // The word is not repeated: it may be a credential typed in the wrong place (SPEC 12: never on
    // the command line, and never in an error). A near command's name is the gateway's own text.
    const [{ NAMED_COMMANDS }, { nearestName }] = await Promise.all([import('./cli-args.js'), import('./config/nearest-name.js')])
    const meant = nearestName(command.unknown, [...NAMED_COMMANDS, 'help', 'version'])
    throw new UsageError(meant === undefined ? 'unknown command (the first argument names none; it is not repeated: it may be a credential)' : `unknown command: did you mean ${meant}?`)
  }
  switch (command) {
    case 'help':
      return void console.log(COMMAND_HELP[args[0] ?? ''] ?? USAGE)
    case 'version':
      return void console.log(packageVersion())
    case 'simulator':
      return runSimulatorCommand(args)
    case 'legacy-simulator':
      return runLegacySimulatorCommand(args)
    case 'check-config':
      return checkConfigCommand(args)
    case 'explain':
      return explainCommand(args)
    case 'config-schema':
      if (args.length > 0) throw new UsageError('config-schema takes no arguments')
      return void console.log(JSON.stringify((await import('./config/json-schema.js')).buildConfigJsonSchema(), null, 2))
    case 'run':
      return runCommand(args, held)
    case 'fingerprint':
      return fingerprintCommand(args)
    case 'report':
      process.exitCode = await (await import('./migration-cli.js')).reportCommand(args, writeOut, writeErr)
      return
    case 'sunset-check':
      process.exitCode = await (await import('./migration-cli.js')).sunsetCheckCommand(args, writeOut, writeErr)
      return
    case 'calendar':
      process.exitCode = await (await import('./migration-cli.js')).calendarCommand(args, writeOut)
      return
    case 'healthcheck':
      // cli.ts runs it without loading this module; here for a caller of runCli.
      process.exitCode = await (await import('./healthcheck.js')).runHealthcheck(args, { out: console.log, err: console.error })
  }
}

/** Runs a parsed command line (cli.ts) and owns its exit code on failure. */
export function runCli(commandLine: { command: CliCommand; args: string[] }, held: HeldSignals | undefined): void {
  dispatch(commandLine.command, commandLine.args, held).catch(onFailure)
}

async function onFailure(error: unknown): Promise<void> {
  // The modules are in the cache already when one of their errors is here; loaded otherwise.
  const [{ ConfigError }, { MigrationUsageError }] = await Promise.all([import('./config/load-config.js'), import('./migration-cli.js')])
  if (error instanceof ConfigError) {
    console.error(error.message)
    process.exit(2)
  }
  if (error instanceof UsageError || error instanceof MigrationUsageError || String((error as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS')) {
    console.error(`${usageErrorText(error)}\n\n${USAGE}`)
    process.exit(64)
  }
  if (isListenError(error)) {
    console.error(error.syscall === 'getaddrinfo' ? `v4gw: ${error.message} (listen.host and admin.host are an address or a name this machine resolves)` : `v4gw: ${error.message}`)
    process.exit(1)
  }
  console.error(error)
  process.exit(1)
}
