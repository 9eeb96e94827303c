import { parseArgs } from 'node:util'
import { z } from 'zod'
import { calendarEvents, formatCalendarMarkdown, formatIcs } from './brownout-calendar.js'
import { resolveAdminToken } from './config/admin-token.js'
import { loadConfig } from './config/load-config.js'
import { formatCsv, formatMarkdown, type MigrationAnswer } from './migration-report-format.js'

/** A command line the command cannot run with (exit 64, with the usage). */
export class MigrationUsageError extends Error {}

const DAY_MS = 86_400_000
/** SPEC 12: sunset-check looks back 14 days unless told. */
const DEFAULT_QUIET_DAYS = 14
const ADMIN_TIMEOUT_MS = 15_000

/** Why the admin API gave no answer to read: sunset-check's exit 2 (SPEC 12), report's exit 1. */
class AdminUnavailable extends Error {}

/** `--admin URL` and the token (SPEC 12: `--token-file` or `V4GW_ADMIN_TOKEN`, never an argument). */
const ADMIN_OPTIONS = { admin: { type: 'string' }, 'token-file': { type: 'string' }, tenant: { type: 'string' } } as const

function adminBase(admin: string | undefined): URL {
  if (admin === undefined) throw new MigrationUsageError('--admin URL is required (the admin listener, e.g. http://127.0.0.1:9901)')
  let url: URL
  try {
    url = new URL(admin)
  } catch {
    throw new MigrationUsageError('--admin takes an http:// or https:// URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new MigrationUsageError('--admin takes an http:// or https:// URL')
  // A token never travels in a URL: one written there would be logged and kept in shell history.
  if (url.username !== '' || url.password !== '') throw new MigrationUsageError('--admin takes no user or password: give the token with --token-file FILE or V4GW_ADMIN_TOKEN')
  return url
}

/** The admin token, or why it cannot be had: no answer can be asked for (report 1, sunset-check 2). Never the token's text. */
function adminToken(tokenFile: string | undefined): string | undefined {
  try {
    return resolveAdminToken(tokenFile)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new AdminUnavailable(code === undefined ? (error as Error).message : `--token-file ${String(tokenFile)} could not be read (${code})`)
  }
}

/** Why a fetch or its body failed, by its cause's code (`ECONNREFUSED`, `UND_ERR_SOCKET`) or its name (`TimeoutError`): never its message. */
function failureCause(error: unknown): string {
  const code = (error as { cause?: { code?: unknown } }).cause?.code
  return typeof code === 'string' ? code : (error as Error).name
}

/** GET /admin/migration; never prints or echoes the token. */
async function fetchMigration(base: URL, token: string | undefined, tenant: string | undefined, shape: z.ZodType = JUDGED_SHAPE): Promise<MigrationAnswer> {
  const url = new URL('/admin/migration', base)
  if (tenant !== undefined) url.searchParams.set('tenant', tenant)
  url.searchParams.set('clients', '10000')
  let response: Response
  try {
    response = await fetch(url, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(ADMIN_TIMEOUT_MS) })
  } catch (error) {
    throw new AdminUnavailable(`the admin API at ${base.origin} could not be reached (${failureCause(error)})`)
  }
  let text: string
  try {
    text = await response.text()
  } catch (error) {
    // Cut after its head (a replica restarting) or past the timeout while the body came: no answer to judge.
    throw new AdminUnavailable(`the admin API's answer broke off before its end (${failureCause(error)})`)
  }
  if (response.status !== 200) {
    let code = ''
    try {
      code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? ''
    } catch {
      // not the envelope: the status says enough
    }
    const hint = response.status === 401 ? ': give the admin token with --token-file FILE or V4GW_ADMIN_TOKEN' : response.status === 404 && code === 'TENANT_UNKNOWN' ? ': no such tenant is configured' : ''
    throw new AdminUnavailable(`the admin API answered ${response.status}${code === '' ? '' : ` ${code}`}${hint}`)
  }
  let answer: MigrationAnswer
  try {
    answer = JSON.parse(text) as MigrationAnswer
  } catch {
    throw new AdminUnavailable(`the admin API answered 200 with a body that is not JSON (${response.headers.get('content-type') ?? 'no content-type'})`)
  }
  if (answer?.schemaVersion !== 2) throw new AdminUnavailable(`the admin API answered schemaVersion ${String((answer as Partial<MigrationAnswer> | null)?.schemaVersion)}; this v4gw reads 2`)
  // Something on the way that answers 200 in another shape (a proxy's page, a rewritten body)
  // is no answer to judge: exit 2, not a TypeError read as exit 1, "a client still calls".
  const shaped = shape.safeParse(answer)
  if (!shaped.success) {
    const issue = shaped.error.issues[0]
    throw new AdminUnavailable(`the admin API answered 200 with a body that is not a migration answer (at /${issue?.path.map(String).join('/') ?? ''}: ${issue?.message ?? 'unexpected'})`)
  }
  return answer
}

/** An instant as the answer writes it: a date a comparison can use (`Date.parse` of anything else is NaN, which compares false). */
const instant = z.iso.datetime({ offset: true })

/** The parts of SPEC 12's answer that `sunset-check` and `report` judge on; other members pass. */
const JUDGED_SHAPE = z.looseObject({
  scope: z.enum(['fleet', 'local', 'replica']),
  tenants: z.record(
    z.string(),
    z.looseObject({
      since: instant,
      routes: z.record(
        z.string(),
        z.looseObject({
          requests: z.number(),
          lastSeen: instant.nullable(),
          lastSeenNonExempt: instant.nullable(),
          clients: z.array(z.looseObject({ clientId: z.string(), label: z.string().nullable(), requests: z.number(), lastSeen: instant, exemptUntil: instant.nullable() }))
        })
      )
    })
  )
})

/**
 * What `report`'s Markdown and CSV read besides (migration-report-format.ts): an answer without
 * one of them (an older replica, a rewritten body) is refused in one line, not a TypeError's stack.
 */
const brownoutWindow = z.looseObject({ start: instant, end: instant })
const pause = z.looseObject({ until: instant, reason: z.string() }).nullable()
const REPORTED_SHAPE = z.looseObject({
  generatedAt: instant,
  scope: z.enum(['fleet', 'local', 'replica']),
  configHashes: z.array(z.string()),
  tenants: z.record(
    z.string(),
    z.looseObject({
      since: instant,
      legacyShare: z.array(z.looseObject({ day: z.string(), legacy: z.number(), native: z.number() })),
      brownoutPause: pause,
      routes: z.record(
        z.string(),
        z.looseObject({
          stage: z.string(),
          requests: z.number(),
          lastSeen: instant.nullable(),
          lastSeenNonExempt: instant.nullable(),
          distinctClients: z.number(),
          clientsEvicted: z.number(),
          deprecation: z.looseObject({ sunset: instant.nullable(), nextBrownouts: z.array(brownoutWindow) }).nullable(),
          clients: z.array(
            z.looseObject({
              clientId: z.string(),
              label: z.string().nullable(),
              owner: z.string().nullable(),
              userAgent: z.string().nullable(),
              requests: z.number(),
              firstSeen: instant,
              lastSeen: instant,
              lastBrownout: instant.nullable(),
              exemptUntil: instant.nullable()
            })
          )
        })
      )
    })
  )
})

/** `v4gw report --admin URL [--tenant T] [--format md|csv|json]`: 0 printed, 1 no answer to print. */
export async function reportCommand(args: string[], out: (text: string) => void, err: (text: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...ADMIN_OPTIONS, format: { type: 'string', default: 'md' } } })
  if (positionals.length > 0) throw new MigrationUsageError('report takes no positional argument: the admin token goes in --token-file FILE or V4GW_ADMIN_TOKEN')
  if (!['md', 'csv', 'json'].includes(values.format)) throw new MigrationUsageError('--format is md, csv or json')
  const base = adminBase(values.admin)
  try {
    const answer = await fetchMigration(base, adminToken(values['token-file']), values.tenant, values.format === 'json' ? JUDGED_SHAPE : REPORTED_SHAPE)
    out(values.format === 'json' ? `${JSON.stringify(answer, null, 2)}\n` : values.format === 'csv' ? formatCsv(answer) : formatMarkdown(answer))
    return 0
  } catch (error) {
    if (!(error instanceof AdminUnavailable)) throw error
    err(`v4gw report: ${error.message}\n`)
    return 1
  }
}

/**
 * `v4gw sunset-check` (SPEC 12): 1 when a client that was not exempt called in the last N days,
 * whatever the scope, listing them; 0 only on complete evidence that none did (scope fleet, or
 * replica with --single-replica; since at least N days ago; every route's lastSeenNonExempt
 * older or null); 2 when it cannot tell, saying why.
 */
export async function sunsetCheckCommand(args: string[], out: (text: string) => void, err: (text: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...ADMIN_OPTIONS, route: { type: 'string' }, 'quiet-days': { type: 'string', default: String(DEFAULT_QUIET_DAYS) }, 'single-replica': { type: 'boolean', default: false } }
  })
  if (positionals.length > 0) throw new MigrationUsageError('sunset-check takes no positional argument: the admin token goes in --token-file FILE or V4GW_ADMIN_TOKEN')
  if (values.tenant === undefined || values.tenant === '') throw new MigrationUsageError('--tenant T is required')
  if (!/^\d{1,4}$/.test(values['quiet-days']) || Number(values['quiet-days']) < 1) throw new MigrationUsageError('--quiet-days takes a whole number of days, at least 1')
  const quietDays = Number(values['quiet-days'])
  const base = adminBase(values.admin)
  const cannotTell = (why: string): number => {
    err(`v4gw sunset-check: cannot tell (exit 2): ${why}\n`)
    return 2
  }
  let answer: MigrationAnswer
  try {
    answer = await fetchMigration(base, adminToken(values['token-file']), values.tenant)
  } catch (error) {
    if (error instanceof AdminUnavailable) return cannotTell(error.message)
    throw error
  }
  // Own keys only: `--tenant constructor` or `--route toString` name no tenant or route, not a method of every object.
  const tenant = Object.hasOwn(answer.tenants, values.tenant) ? answer.tenants[values.tenant] : undefined
  if (tenant === undefined) return cannotTell('the answer holds no such tenant')
  const labels = values.route === undefined ? Object.keys(tenant.routes) : [values.route]
  if (values.route !== undefined && !Object.hasOwn(tenant.routes, values.route)) return cannotTell(`the tenant has no legacy route "${values.route}" (its routes: ${Object.keys(tenant.routes).join(', ')})`)
  const nowMs = Date.now()
  const cutoffMs = nowMs - quietDays * DAY_MS
  const window = `the last ${quietDays} day${quietDays === 1 ? '' : 's'}`

  // Exit 1 whatever the scope: someone who is not exempt still calls.
  const callers: string[] = []
  let unlisted = 0
  for (const label of labels) {
    const route = tenant.routes[label]!
    // SPEC 12: exempt or not as of each call, which the route's lastSeenNonExempt records; a
    // client whose exemption ran out since it last called did not call unexempt.
    if (route.lastSeenNonExempt === null || Date.parse(route.lastSeenNonExempt) <= cutoffMs) continue
    // Who it was, as far as the list tells: recent callers without an exemption in force now.
    const listed = route.clients.filter((client) => Date.parse(client.lastSeen) > cutoffMs && (client.exemptUntil === null || Date.parse(client.exemptUntil) <= nowMs))
    for (const client of listed) {
      callers.push(`  ${label}  ${client.clientId}${client.label === null ? '' : ` ${client.label}`}${client.owner === null ? '' : ` (owner ${client.owner})`}  last ${client.lastSeen}  ${client.requests} requests`)
    }
    // The last non-exempt caller may be one no longer listed (evicted, past the list) or exempt since.
    if (listed.length === 0) {
      unlisted++
      callers.push(`  ${label}  (a client not in the list: evicted, beyond it, or exempted since)  last non-exempt call ${route.lastSeenNonExempt}`)
    }
  }
  if (callers.length > 0) {
    out(`v4gw sunset-check: clients that are not exempt called tenant ${values.tenant} in ${window} (scope ${answer.scope}):\n${callers.join('\n')}\n`)
    if (unlisted > 0) out(`(${unlisted} route${unlisted === 1 ? '' : 's'} with a recent caller not listed: see v4gw report)\n`)
    return 1
  }
  if (answer.scope === 'local') return cannotTell("the answering replica cannot reach the shared store (scope local): other replicas' traffic is unknown")
  if (answer.scope === 'replica' && !values['single-replica']) {
    return cannotTell('the gateway keeps its counts in memory (scope replica): other processes are unknown; add --single-replica if this is the only one')
  }
  if (Date.parse(tenant.since) > cutoffMs) return cannotTell(`the counts are complete only since ${tenant.since}, less than ${quietDays} days ago`)
  out(`v4gw sunset-check: no client that is not exempt called ${values.route ?? `any legacy route of tenant ${values.tenant}`} in ${window} (scope ${answer.scope}, counting since ${tenant.since})\n`)
  return 0
}

/** `v4gw calendar --config FILE [--tenant T] [--format ics|md]` (SPEC 13). */
export async function calendarCommand(args: string[], out: (text: string) => void): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { config: { type: 'string', short: 'c' }, tenant: { type: 'string' }, format: { type: 'string', default: 'ics' } } })
  if (positionals.length > 0) throw new MigrationUsageError('calendar takes --config FILE')
  if (values.config === undefined) throw new MigrationUsageError('--config FILE is required')
  if (values.format !== 'ics' && values.format !== 'md') throw new MigrationUsageError('--format is ics or md')
  const config = await loadConfig(values.config)
  if (values.tenant !== undefined && !Object.hasOwn(config.tenants, values.tenant)) throw new MigrationUsageError(`--tenant: the config has no tenant "${values.tenant}"`)
  const events = calendarEvents(config, values.tenant)
  out(values.format === 'ics' ? formatIcs(events, Date.now()) : formatCalendarMarkdown(events))
  return 0
}
