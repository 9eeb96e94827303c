import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { ROOT as root, runCli, spawnCli, useCli } from '../helpers/spawn-cli.js'
import { useTempDir } from '../helpers/temp-dir.js'

const dir = useTempDir('v4gw-cli-')

describe('v4gw --version and --help', () => {
  it('prints the version of package.json with --version and exits 0', async () => {
    const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }
    const result = await runCli(['--version'])
    expect(result.code).toBe(0)
    expect(result.stdout.trim()).toBe(version)
  })

  it('prints the usage with --help and exits 0', async () => {
    const result = await runCli(['--help'])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('Usage:')
    expect(result.stdout).toContain('v4gw check-config FILE')
    expect(result.stdout).toContain('v4gw simulator')
  })

  it.each([['simulator', '--help'], ['check-config', '--help'], ['explain', '-h'], ['run', '--help'], ['--config', 'config/gateway.yaml', '--help']])('prints the usage and exits 0 for %s %s', async (...args: string[]) => {
    const result = await runCli(args)
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('Usage:')
  })

  it.each([['check-config', '--help'], ['help', 'check-config'], ['check-config', 'config/gateway.yaml', '-h']])('prints the help of check-config alone for %s %s', async (...args: string[]) => {
    const result = await runCli(args)
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/^Usage: v4gw check-config FILE\n/)
    expect(result.stdout).toContain('Exit codes: 0 valid, 2 invalid config')
    expect(result.stdout).not.toContain('v4gw simulator')
  })

  it.each([
    [['check-config', 'config/gateway.yaml', 'extra'], 'check-config takes one FILE'],
    [['config-schema', 'extra'], 'config-schema takes no arguments'],
    [['explain', '--config', 'config/gateway.yaml', 'GET', '/v4/execute', 'extra'], 'explain takes METHOD and PATH'],
    [['simulator', 'extra'], 'an argument this command does not take']
  ])('exits 64 with the usage for arguments a command does not take: %j', async (args, message) => {
    const result = await runCli(args)
    expect(result.code).toBe(64)
    expect(result.stderr).toContain(message)
    expect(result.stderr).toContain('Usage:')
  })

  it('exits non-zero with the usage for an unknown command, naming a near command but never repeating the word', async () => {
    const result = await runCli(['frobnicate'])
    expect(result.code).not.toBe(0)
    expect(result.stderr).toContain('unknown command')
    expect(result.stderr).not.toContain('frobnicate')
    expect(result.stderr).toContain('Usage:')
    expect((await runCli(['fingreprint'])).stderr).toContain('unknown command: did you mean fingerprint?')
  })

  // SPEC 12: a credential never goes on the command line; one typed there anyway is never echoed.
  it.each([[['key_live_abc123']], [['--config', 'config/gateway.yaml', 'key_live_abc123']], [['simulator', 'key_live_abc123']], [['healthcheck', 'key_live_abc123']]])(
    'never repeats a stray argument (it may be a credential): %j',
    async (args) => {
      const result = await runCli(args)
      expect(result.code).not.toBe(0)
      expect(`${result.stdout}${result.stderr}`).not.toContain('key_live_abc123')
    }
  )
})

describe('v4gw check-config', () => {
  it('validates config/gateway.yaml, prints the tenant and exits 0', async () => {
    const result = await runCli(['check-config', 'config/gateway.yaml'])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('config/gateway.yaml: valid')
    expect(result.stdout).toMatch(/tenant demo\b.*staging/)
  })

  it('exits non-zero and prints every problem with its path for an invalid file', async () => {
    const path = await dir.write(
      'bad.yaml',
      [
        'listn: { port: 1 }',
        'limits: { bodyBytes: 0 }',
        'tenancy: { default: ghost }',
        'tenants:',
        '  acme:',
        '    upstream: { staging: "http://127.0.0.1:4010", target: production }',
        '    legacy:',
        '      routes:',
        '        - { method: GET, path: /v1/policies, action: proxy }',
        ''
      ].join('\n')
    )
    const result = await runCli(['check-config', path])
    expect(result.code).not.toBe(0)
    expect(result.code).not.toBeNull()
    expect(result.stderr).toContain('listn')
    expect(result.stderr).toMatch(/limits\.bodyBytes: /)
    expect(result.stderr).toMatch(/tenancy\.default: /)
    expect(result.stderr).toMatch(/tenants\.acme\.upstream(\.production|\.target)?: /)
    expect(result.stderr).toMatch(/tenants\.acme\.legacy\.routes\.0\.rewrite: /)
  })

  it('prints tenants.acme.upstream.staging: Invalid URL as a problem, not a crash, for an upstream that is not a URL', async () => {
    const path = await dir.write('bad-url.yaml', 'tenants:\n  acme:\n    upstream: { staging: "not a url" }\n')
    const result = await runCli(['check-config', path])
    expect(result.code).toBe(2)
    expect(result.stderr).toMatch(/tenants\.acme\.upstream\.staging: Invalid URL/)
  })

  it('says "quote this value" once, and exits 2, for SPEC 8\'s admin line pasted unquoted', async () => {
    const path = await dir.write('unquoted.yaml', 'admin: { host: 127.0.0.1, port: 9901, token: ${V4GW_ADMIN_TOKEN:-} }\ntenants:\n  acme:\n    upstream: { staging: embedded }\n')
    const result = await runCli(['check-config', path])
    expect(result.code).toBe(2)
    expect(result.stderr.trim().split('\n').slice(1)).toEqual([expect.stringMatching(/^ {2}- cannot parse the file: quote this value: .* at line 1, column 46$/)])
  })

  it('suggests the nearest known key for an unknown one, and reports an unset variable once', async () => {
    const path = await dir.write('typo.yaml', 'limits: { upstreamTimeout: 30000 }\nlisten:\n  port: ${V4GW_UNSET_PORT}\ntenants:\n  acme:\n    upstream: { staging: embedded }\n')
    const result = await runCli(['check-config', path])
    expect(result.code).toBe(2)
    expect(result.stderr.trim().split('\n').slice(1)).toEqual([
      expect.stringMatching(/^ {2}- listen\.port: environment variable V4GW_UNSET_PORT is not set/),
      '  - limits: Unrecognized key: "upstreamTimeout"; did you mean `upstreamTimeoutMs`?'
    ])
  })

  it("prints every route's effective stage, canary, shadow, idempotency and deprecation, the route's entry merged over the tenant's (SPEC 14)", async () => {
    const path = await dir.write(
      'stages.yaml',
      [
        'tenants:',
        '  acme:',
        '    upstream: { staging: "http://127.0.0.1:4010", legacy: "http://127.0.0.1:4011" }',
        '    legacy:',
        '      deprecation: { date: "2030-01-01T00:00:00Z" }',
        '      idempotency: { ttlMs: 60000 }',
        '      routes:',
        '        - { method: POST, path: /v1/headless/runs, action: execute }',
        '        - { method: POST, path: /v1/runs/invoke, action: session-execute, stateKey: "body:/stateId" }',
        '        - { method: GET, path: /v1/policies, action: proxy, rewrite: /v4/policies }',
        '        - { method: POST, path: "/v1/runs/:runId/invoke", action: session-execute, stateKey: "param:runId" }',
        '    migration:',
        '      stage: shadow',
        '      canary: { percent: 10, deny: ["fp:0123456789abcdef"] }',
        '      shadow: { percent: 5, ignore: [/output/at] }',
        '      routes:',
        '        "POST /v1/headless/runs": { stage: canary, canary: { percent: 25 }, shadow: { timeoutMs: 900 }, idempotency: { forwardHeader: x-retry-key } }',
        '        "POST /v1/runs/invoke": { idempotency: null, deprecation: { sunset: "2031-01-01T00:00:00Z" } }',
        '        "GET /v1/policies": { stage: legacy }',
        '  plain:',
        '    upstream: { staging: embedded }',
        ''
      ].join('\n')
    )
    const result = await runCli(['check-config', path])
    expect(result.code).toBe(0)
    const lines = result.stdout.split('\n')
    const under = (route: string): string[] => {
      const start = lines.indexOf(`    ${route}`)
      expect(start, route).toBeGreaterThan(-1)
      const rest = lines.slice(start + 1)
      const end = rest.findIndex((line) => !line.startsWith('      '))
      return rest.slice(0, end === -1 ? undefined : end).map((line) => line.trim())
    }
    expect(lines).toContain('  tenant acme: target staging, origin http://127.0.0.1:4010, legacy http://127.0.0.1:4011, fallback reject')
    expect(under('POST /v1/headless/runs: execute')).toEqual([
      "stage canary (the route's)",
      'canary 25% of clients, allow 0, deny 1',
      'shadow 5% to staging, timeout 900 ms, at most 100 in flight, answers up to 1048576 bytes, credentials forwarded, 1 ignored pointer(s)',
      'idempotency on: key header idempotency-key, kept 60000 ms, duplicates wait 10000 ms, answers kept up to 1048576 bytes, key sent to V4 in x-retry-key',
      "deprecation: the tenant's"
    ])
    expect(under('POST /v1/runs/invoke: session-execute (state key body:/stateId)')).toEqual([
      "stage shadow (the tenant's)",
      'canary 10% of clients, allow 0, deny 1',
      'shadow 5% to staging, timeout 5000 ms, at most 100 in flight, answers up to 1048576 bytes, credentials forwarded, 1 ignored pointer(s)',
      'idempotency off',
      'deprecation 2030-01-01T00:00:00Z, sunset 2031-01-01T00:00:00Z (afterSunset serve)'
    ])
    // The tenant's settings as they are; idempotency said to be unused where the legacy upstream serves every client.
    expect(under('POST /v1/runs/:runId/invoke: session-execute (state key param:runId)')).toEqual([
      "stage shadow (the tenant's)",
      'canary 10% of clients, allow 0, deny 1',
      'shadow 5% to staging, timeout 5000 ms, at most 100 in flight, answers up to 1048576 bytes, credentials forwarded, 1 ignored pointer(s)',
      'idempotency on: key header idempotency-key, kept 60000 ms, duplicates wait 10000 ms, answers kept up to 1048576 bytes, key not sent to V4 (unused while the legacy upstream serves this route)',
      "deprecation: the tenant's"
    ])
    // A proxy route is never compared nor keyed (SPEC 15, 16).
    expect(under('GET /v1/policies: proxy -> /v4/policies')).toEqual(["stage legacy (the route's)", 'canary 10% of clients, allow 0, deny 1', "deprecation: the tenant's"])
    // A tenant with no stages, idempotency or deprecation prints its routes as before.
    const plain = lines.slice(lines.indexOf('  tenant plain: target staging, origin built-in simulator, fallback reject') + 1)
    expect(plain.filter((line) => line.startsWith('      '))).toEqual([])
  })

  it('exits non-zero and names the file when it does not exist', async () => {
    const result = await runCli(['check-config', join(dir.path, 'missing.yaml')])
    expect(result.code).not.toBe(0)
    expect(result.stderr).toContain('missing.yaml')
  })
})

describe('v4gw --config FILE (the gateway process)', () => {
  const running = useCli(async () => [
    '--config',
    await dir.write(
      'run.yaml',
      [
        'listen: { host: 127.0.0.1, port: 0 }',
        'admin: { host: 127.0.0.1, port: 0 }',
        'log: { level: warn }',
        'tenancy: { default: demo }',
        'tenants:',
        '  demo:',
        '    upstream: { staging: embedded }',
        // Unknown paths go to the upstream: the embedded simulator's test controls must not be among them.
        '    fallback: proxy',
        ''
      ].join('\n')
    )
  ])
  let trafficUrl: string
  beforeAll(async () => {
    trafficUrl = (await running.waitFor(/v4gw listening on (http:\/\/127\.0\.0\.1:\d+)/))[1] as string
  })

  it('answers a legacy POST /v1/headless/runs through the embedded simulator with 200', async () => {
    const answer = await send(trafficUrl, '/v1/headless/runs', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: { q: 1 } } })
    expect(answer.status).toBe(200)
    expect(answer.json.effective).toEqual({ policy: 'default', route: 'standard', risk: 'low' })
  })

  it('does not serve the simulator’s test controls from the embedded simulator, even to traffic proxied to it', async () => {
    const revoke = await send(trafficUrl, '/_simulator/keys/revoke', { json: { key: 'key_demo_admin' } })
    expect(revoke.status).toBe(404)
    const expire = await send(trafficUrl, '/_simulator/sessions/ses_x/expire', { method: 'POST' })
    expect(expire.status).toBe(404)
    // The key still works: nothing was revoked.
    expect((await send(trafficUrl, '/v4/policies', { headers: { 'x-service-api-key': 'key_demo_admin' } })).status).toBe(200)
  })

  it('exits 0 on SIGTERM', async () => {
    running.child.kill('SIGTERM')
    const { code, signal } = await running.exited
    expect(signal).toBeNull()
    expect(code).toBe(0)
  })
})

describe('v4gw with V4GW_CONFIG', () => {
  it('runs the gateway from the file V4GW_CONFIG names when there is no --config', async () => {
    const path = await dir.write('env-run.yaml', 'listen: { host: 127.0.0.1, port: 0 }\nadmin: { host: 127.0.0.1, port: 0 }\nlog: { level: warn }\ntenants:\n  demo:\n    upstream: { staging: embedded }\n')
    const running = await spawnCli([], { env: { V4GW_CONFIG: path } })
    await running.waitFor(/v4gw listening on http:\/\/127\.0\.0\.1:\d+/)
    running.child.kill('SIGTERM')
    expect((await running.exited).code).toBe(0)
  })

  it('exits non-zero and prints the problem when the config is invalid', async () => {
    const path = await dir.write('env-bad.yaml', 'listen: { port: 0 }\ntenants: {}\n')
    const result = await runCli([], { V4GW_CONFIG: path })
    expect(result.code).not.toBe(0)
    expect(result.stderr).toMatch(/tenants: /)
  })
})

describe('v4gw simulator', () => {
  const running = useCli(() => ['simulator', '--port', '0'])
  let simulatorUrl: string
  beforeAll(async () => {
    simulatorUrl = (await running.waitFor(/v4 simulator listening on (http:\/\/127\.0\.0\.1:\d+)/))[1] as string
  })

  it('prints its URL and answers POST /v4/execute with 200', async () => {
    const answer = await send(simulatorUrl, '/v4/execute', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: 'hello' } })
    expect(answer.status).toBe(200)
    expect(answer.json.effective).toEqual({ policy: 'default', route: 'standard', risk: 'low' })
    expect(typeof answer.json.meta.requestId).toBe('string')
  })

  it('prints no deprecation warning as it starts', () => {
    expect(running.stderr()).not.toMatch(/DeprecationWarning|FSTDEP/)
  })

  it('names a port that is taken in one line and exits 1, without a stack trace: simulator and gateway alike', async () => {
    const port = new URL(simulatorUrl).port
    const simulator = await runCli(['simulator', '--port', port])
    expect(simulator.code).toBe(1)
    expect(simulator.stderr.trim()).toBe(`v4gw: listen EADDRINUSE: address already in use 127.0.0.1:${port}`)

    const path = await dir.write('taken.yaml', `listen: { host: 127.0.0.1, port: ${port} }\nadmin: { host: 127.0.0.1, port: 0 }\nlog: { level: warn }\ntenants:\n  demo:\n    upstream: { staging: embedded }\n`)
    const gateway = await runCli(['--config', path])
    expect(gateway.code).toBe(1)
    expect(gateway.stderr.trim()).toBe(`v4gw: listen EADDRINUSE: address already in use 127.0.0.1:${port}`)
  })

  it('says in one line, without a stack trace, that a listen host does not resolve', async () => {
    const path = await dir.write('unresolved.yaml', 'listen: { host: no-such-host.invalid, port: 0 }\nadmin: { host: 127.0.0.1, port: 0 }\nlog: { level: warn }\ntenants:\n  demo:\n    upstream: { staging: embedded }\n')
    const gateway = await runCli(['--config', path])
    expect(gateway.code).toBe(1)
    expect(gateway.stderr.trim()).toMatch(/^v4gw: getaddrinfo \w+ no-such-host\.invalid \(listen\.host and admin\.host are an address or a name this machine resolves\)$/)
  })

  it.each(['abc', '70000', ''])('refuses --port %j as a usage error (64), without a stack trace', async (port) => {
    const { code, stderr } = await runCli(['simulator', '--port', port])
    expect(code).toBe(64)
    expect(stderr).toContain('--port must be a port number')
    expect(stderr).not.toMatch(/\n\s+at /)
  })
})

describe('v4gw explain', () => {
  it('prints the V4 call a legacy run becomes, with its credential redacted, and exits 0', async () => {
    const { code, stdout, stderr } = await runCli([
      'explain', '--config', 'config/gateway.yaml', 'POST', '/v1/headless/runs',
      '--header', 'authorization: Bearer explain-secret-token', '--body', '{"input":{"q":1},"policy":"strict","extra":true}'
    ])
    expect(code).toBe(0)
    const explanation = JSON.parse(stdout)
    expect(explanation).toMatchObject({ tenant: 'demo', trafficClass: 'legacy', legacyRoute: 'POST /v1/headless/runs', action: 'execute' })
    expect(explanation.calls).toEqual([
      {
        method: 'POST',
        url: 'http://embedded-simulator/v4/execute',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json',
          'accept-encoding': 'identity',
          authorization: 'Bearer [redacted]',
          'x-request-id': '(a new request id)',
          'x-forwarded-for': '(client address)',
          'x-forwarded-proto': 'http',
          // SPEC 14: every upstream request names the fleet, random per gateway process with
          // store: memory: this process cannot know the running gateway's (SPEC 9's placeholder).
          via: "1.1 v4gw-(the gateway process's fleet id)"
        },
        body: { extra: true, input: { q: 1 }, policy: 'strict' }
      }
    ])
    expect(stdout).not.toContain('explain-secret-token')
    // Nor its stage overrides and pauses: said, not shown as the config's without a word.
    expect(stderr).toContain('store memory')
    expect(stderr).toContain('POST /admin/explain')
  })

  it('refuses a --header without a name (64) without repeating its text, which may be a credential', async () => {
    const { code, stdout, stderr } = await runCli(['explain', '--config', 'config/gateway.yaml', 'POST', '/v1/headless/runs', '-H', 'Bearer eyJhbGciOi-explain-typo-secret'])
    expect(code).toBe(64)
    expect(stderr).toContain('--header takes NAME:VALUE')
    expect(`${stdout}${stderr}`).not.toContain('explain-typo-secret')
    expect(`${stdout}${stderr}`).not.toContain('eyJhbGci')
  })

  it('takes a header named like an object property (__proto__, constructor) as a header, and prints a body too deep to print parsed as its text', async () => {
    const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`
    const { code, stdout, stderr } = await runCli(['explain', '--config', 'config/gateway.yaml', 'POST', '/v4/execute', '-H', '__proto__: x', '-H', 'constructor: y', '-H', 'authorization: Bearer demo-token-alice', '--body', deep])
    expect(stderr).toBe('')
    expect(code).toBe(0)
    const explanation = JSON.parse(stdout)
    expect(explanation.calls[0].headers).toMatchObject({ constructor: 'y' })
    expect(explanation.calls[0].body).toBe(deep)
  })

  it('redacts a credential header spelled with underscores in the calls it prints (a proxy may read x_api_key as x-api-key)', async () => {
    const { code, stdout } = await runCli(['explain', '--config', 'config/gateway.yaml', 'GET', '/v4/policies', '-H', 'x_api_key: key_underscore_explain_secret', '-H', 'x_session_token: underscore_session_secret'])
    expect(code).toBe(0)
    const explanation = JSON.parse(stdout)
    expect(explanation.calls[0].headers).toMatchObject({ x_api_key: '[redacted]', x_session_token: '[redacted]' })
    expect(stdout).not.toContain('underscore_explain_secret')
    expect(stdout).not.toContain('underscore_session_secret')
  })

  it('prints both calls of a session-execute route, the start only on a session-map miss', async () => {
    const { stdout } = await runCli(['explain', '--config', 'config/gateway.yaml', '--tenant', 'demo', 'POST', '/v1/runs/run-9/invoke', '-H', 'x-api-key: explain-secret-2', '--body', '{"input":1,"risk":"high"}'])
    const explanation = JSON.parse(stdout)
    expect(explanation.calls.map((call: { url: string }) => call.url)).toEqual([
      'http://embedded-simulator/v4/sessions.start',
      'http://embedded-simulator/v4/sessions/{sessionId}/executions.execute'
    ])
    expect(explanation.calls[0].body).toEqual({ risk: 'high' })
    expect(explanation.calls[0].when).toContain('"run-9"')
    expect(stdout).not.toContain('explain-secret-2')
  })

  it('prints the answer the gateway would give by itself when a key_* service key calls a runtime route', async () => {
    const { code, stdout } = await runCli(['explain', '--config', 'config/gateway.yaml', 'POST', '/v1/headless/runs', '-H', 'x-api-key: key_explain_secret', '--body', '{"input":1}'])
    expect(code).toBe(0)
    expect(JSON.parse(stdout)).toMatchObject({ calls: [], answer: { status: 401, code: 'AUTH_INVALID' } })
    expect(stdout).not.toContain('key_explain_secret')
  })

  it('exits 64 with the usage when METHOD or PATH is missing', async () => {
    const { code, stderr } = await runCli(['explain', '--config', 'config/gateway.yaml', 'POST'])
    expect(code).toBe(64)
    expect(stderr).toContain('Usage:')
  })
})
