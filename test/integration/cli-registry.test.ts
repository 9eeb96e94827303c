import { hash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { send } from '../helpers/http.js'
import { startHttpServer } from '../helpers/http-server.js'
import { until, useRedisServer } from '../helpers/redis-server.js'
import { runCli } from '../helpers/spawn-cli.js'
import { startGateway, testConfig, useGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { configSchema } from '../../src/config/schema.js'
import { deepFreeze } from '../../src/util/deep-freeze.js'

/**
 * SPEC 12's and 13's command-line tools, the real CLI (node dist/cli.js) against a real gateway
 * on loopback; dates computed from now.
 */
const HOUR = 3_600_000
const DAY = 24 * HOUR
const iso = (ms: number): string => new Date(ms).toISOString()
const clientIdOf = (token: string): string => `fp:${hash('sha256', token, 'hex').slice(0, 16)}`
const ADMIN_TOKEN = 'adm-secret-4b1f0c9e7d2a'
const ALICE = { authorization: 'Bearer demo-token-alice' }
const BOB = { authorization: 'Bearer demo-token-bob' }
const HEADLESS = 'POST /v1/headless/runs'
const dir = useTempDir('v4gw-registry-cli-')

function call(gateway: StartedGateway, headers: Record<string, string>, path = '/v1/headless/runs'): Promise<unknown> {
  return send(gateway.url, path, { headers, json: { input: 1, stateId: 's-1' } })
}

describe('v4gw report (SPEC 12)', () => {
  const sim = useSimulator()
  const now = Date.now()
  const gw = useGateway(() =>
    testConfig(sim.url, {
      admin: { token: ADMIN_TOKEN },
      tenants: {
        acme: {
          upstream: { staging: sim.url },
          clients: { labels: { [clientIdOf('demo-token-alice')]: { name: 'billing-batch', owner: 'team-billing' } } },
          legacy: { deprecation: { date: iso(now - 30 * DAY), sunset: iso(now + 90 * DAY), brownouts: { windows: [{ start: iso(now + 20 * DAY), end: iso(now + 20 * DAY + HOUR) }] } } }
        }
      }
    })
  )
  const env = { V4GW_ADMIN_TOKEN: ADMIN_TOKEN }

  it('prints a Markdown status update: the burn-down per tenant, the routes and the clients still calling, most recent first', async () => {
    await call(gw, { ...BOB, 'user-agent': 'reports/3.1' })
    await call(gw, { ...ALICE, 'user-agent': 'billing | batch/1.0' })
    await send(gw.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    const result = await runCli(['report', '--admin', gw.adminUrl], env)
    expect(result.code).toBe(0)
    const md = result.stdout
    expect(md).toContain('# Legacy API migration status')
    expect(md).toContain('## Tenant acme')
    expect(md).toMatch(/\| day \| legacy \| native \| legacy share \|/)
    expect(md).toContain(`| ${iso(Date.now()).slice(0, 10)} | 2 | 1 | 66.7 % |`)
    expect(md).toMatch(/\| POST \/v1\/headless\/runs \| translate \| 2 \| 2 \|/)
    // Alice called last: first in the list, with her label and owner; the | in her user agent cannot end a cell.
    const clients = md.slice(md.indexOf('### Clients still calling'))
    expect(clients.indexOf('billing-batch')).toBeLessThan(clients.indexOf(clientIdOf('demo-token-bob')))
    expect(clients).toContain(`billing-batch (${clientIdOf('demo-token-alice')}) | team-billing |`)
    expect(clients).toContain('billing \\| batch/1.0')
    expect(md).not.toContain(ADMIN_TOKEN)
  })

  it('prints CSV whose cells cannot start a formula in a spreadsheet', async () => {
    await call(gw, { authorization: 'Bearer demo-token-carol', 'user-agent': '=HYPERLINK("http://evil.example","x")' })
    await call(gw, { authorization: 'Bearer demo-token-dave', 'user-agent': '-2+3' })
    await call(gw, { authorization: 'Bearer demo-token-erin', 'user-agent': '@SUM(A1)' })
    const result = await runCli(['report', '--admin', gw.adminUrl, '--format', 'csv', '--tenant', 'acme'], env)
    expect(result.code).toBe(0)
    const lines = result.stdout.split('\r\n')
    expect(lines[0]).toBe('tenant,route,routeRequests,routeLastSeen,routeLastSeenNonExempt,clientId,label,owner,userAgent,requests,firstSeen,lastSeen,lastBrownout,exemptUntil')
    expect(result.stdout).toContain(`,"'=HYPERLINK(""http://evil.example"",""x"")",`)
    expect(result.stdout).toContain(",'-2+3,")
    expect(result.stdout).toContain(",'@SUM(A1),")
    for (const line of lines.slice(1, -1)) expect(line).not.toMatch(/(^|,)[=+\-@\t\r]/)
  })

  it('prints the answer as JSON with --format json, the token read from --token-file', async () => {
    const tokenFile = await dir.write('admin-token', `${ADMIN_TOKEN}\n`)
    const result = await runCli(['report', '--admin', gw.adminUrl, '--format', 'json', '--token-file', tokenFile])
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout)).toMatchObject({ schemaVersion: 2, scope: 'replica', tenants: { acme: { routes: { [HEADLESS]: { requests: expect.any(Number) } } } } })
  })

  it('exits 1 naming the missing token when the admin API refuses, and never takes the token as an argument', async () => {
    const refused = await runCli(['report', '--admin', gw.adminUrl])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('401')
    expect(refused.stderr).toContain('--token-file')
    const asArguments = await Promise.all([runCli(['report', '--admin', gw.adminUrl, ADMIN_TOKEN]), runCli(['report', '--admin', gw.adminUrl, '--token', ADMIN_TOKEN])])
    for (const result of asArguments) {
      expect(result.code).toBe(64)
      expect(result.stdout + result.stderr).not.toContain(ADMIN_TOKEN)
    }
  }, 60_000)
})

describe('v4gw sunset-check (SPEC 12)', () => {
  const redis = useRedisServer()
  const sim = useSimulator()
  const env = { V4GW_ADMIN_TOKEN: ADMIN_TOKEN }
  const now = Date.now()
  let gw: StartedGateway

  async function check(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return runCli(['sunset-check', '--admin', gw.adminUrl, '--tenant', 'acme', ...args], env)
  }

  it('judges a call by the exemption in force when it was made: one whose exemption is gone since does not fail it', async () => {
    await redis.client().set('lapsed:r:since', String(now - 30 * DAY))
    const config = (exempt: { client: string; until: string }[]) =>
      testConfig(sim.url, {
        admin: { token: ADMIN_TOKEN },
        store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'lapsed:' }, flushMs: 200 },
        tenants: { acme: { upstream: { staging: sim.url }, legacy: { deprecation: { date: iso(now - 30 * DAY), exempt } } } }
      })
    gw = await startGateway(config([{ client: clientIdOf('demo-token-alice'), until: iso(now + 10 * DAY) }]))
    await call(gw, ALICE)
    await until(async () => (await send(gw.adminUrl, '/admin/migration?tenant=acme', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json.tenants.acme.routes[HEADLESS].clients.length === 1, 5_000)
    // The exemption is withdrawn after the call: the call was still made under it.
    await gw.gateway.applyConfig(deepFreeze(configSchema.parse(config([]))))
    const lapsed = await check()
    expect(lapsed.stderr).toBe('')
    expect(lapsed.code).toBe(0)
    // A call without the exemption fails it, naming the client.
    await call(gw, ALICE)
    const busy = await check()
    expect(busy.code).toBe(1)
    expect(busy.stdout).toContain(clientIdOf('demo-token-alice'))
  }, 60_000)

  it('still exits 1 after Redis, full under volatile-lru (the shipped policy), evicted a quiet route\'s other registry keys', async () => {
    const client = redis.client()
    await client.set('evict:r:since', String(now - 30 * DAY))
    const config = testConfig(sim.url, {
      admin: { token: ADMIN_TOKEN },
      store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'evict:' }, flushMs: 200 },
      tenants: { acme: { upstream: { staging: sim.url } } }
    })
    const first = await startGateway(config)
    await call(first, ALICE)
    await until(async () => (await client.exists(`evict:r:acme:c:${HEADLESS}`)) === 1, 5_000)
    await first.close()
    // Memory pressure from keys with a TTL (sessions, idempotency records): the least recently
    // used go, which are the quiet route's, until its client list is gone.
    const used = Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1])
    await client.config('SET', 'maxmemory-policy', 'volatile-lru')
    await client.config('SET', 'maxmemory', String(used + 4 * 1024 * 1024))
    try {
      const filler = 'x'.repeat(8 * 1024)
      // Until every key of the family that has a TTL is gone (the old m: had one too).
      const evictable = async (): Promise<number> => {
        let count = 0
        for (const key of await client.keys('evict:r:acme:*')) if ((await client.ttl(key)) > 0) count++
        return count
      }
      for (let round = 0; round < 1_000 && (await evictable()) > 0; round++) {
        const pipeline = client.pipeline()
        for (let index = 0; index < 100; index++) pipeline.set(`filler:${round}:${index}`, filler, 'EX', 3_600)
        await pipeline.exec()
      }
      expect(await evictable()).toBe(0)
    } finally {
      await client.config('SET', 'maxmemory', '0')
      await client.config('SET', 'maxmemory-policy', 'noeviction')
    }
    gw = await startGateway(config)
    const busy = await check('--route', HEADLESS)
    expect(busy.stderr).toBe('')
    expect(busy.code).toBe(1)
    expect(busy.stdout).toContain('a client not in the list')
  }, 60_000)

  it('exits 0 on fleet-wide evidence, 1 listing a client that is not exempt, 2 when it cannot tell', async () => {
    // The store's registry began 30 days ago: complete data for any --quiet-days up to 30.
    await redis.client().set('cli:r:since', String(now - 30 * DAY))
    gw = await startGateway(
      testConfig(sim.url, {
        admin: { token: ADMIN_TOKEN },
        store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'cli:' }, flushMs: 200 },
        tenants: {
          acme: {
            upstream: { staging: sim.url },
            clients: { labels: { [clientIdOf('demo-token-alice')]: 'billing-batch' } },
            legacy: { deprecation: { date: iso(now - 30 * DAY), exempt: [{ client: clientIdOf('demo-token-bob'), until: iso(now + 10 * DAY) }] } }
          }
        }
      })
    )
    // Only an exempt client calls /v1/runs/invoke; a client that is not exempt calls /v1/headless/runs.
    await call(gw, BOB, '/v1/runs/invoke')
    await call(gw, ALICE)

    // Independent runs of the CLI, side by side (each process takes seconds to start on a busy machine).
    const [quiet, busy, unknownRoute, inheritedName, unknownTenant, tooRecent, noToken] = await Promise.all([
      check('--route', 'POST /v1/runs/invoke'),
      check(),
      check('--route', 'GET /v1/nothing'),
      // A name every object inherits is no route either (it was a TypeError: exit 1, "still called").
      check('--route', 'constructor'),
      runCli(['sunset-check', '--admin', gw.adminUrl, '--tenant', 'globex'], env),
      check('--route', 'POST /v1/runs/invoke', '--quiet-days', '60'),
      runCli(['sunset-check', '--admin', gw.adminUrl, '--tenant', 'acme'])
    ])
    expect(quiet.stderr).toBe('')
    expect(quiet.code).toBe(0)
    expect(quiet.stdout).toContain('scope fleet')
    expect(busy.code).toBe(1)
    expect(busy.stdout).toContain(`POST /v1/headless/runs  ${clientIdOf('demo-token-alice')} billing-batch`)
    expect(unknownRoute.code).toBe(2)
    expect(unknownRoute.stderr).toContain('no legacy route')
    expect(inheritedName.code).toBe(2)
    expect(inheritedName.stderr).toContain('no legacy route "constructor"')
    expect(unknownTenant.code).toBe(2)
    expect(unknownTenant.stderr).toContain('TENANT_UNKNOWN')
    expect(tooRecent.code).toBe(2)
    expect(tooRecent.stderr).toContain('complete only since')
    expect(noToken.code).toBe(2)
    expect(noToken.stderr).toContain('401')

    // Redis away: this replica cannot speak for the fleet.
    await redis.kill()
    await until(async () => (await send(gw.adminUrl, '/admin/migration', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json.scope === 'local', 5_000)
    const local = await check('--route', 'POST /v1/runs/invoke')
    expect(local.code).toBe(2)
    expect(local.stderr).toContain('scope local')
    // Someone who is not exempt calls during the outage: 1 whatever the scope.
    await call(gw, ALICE)
    expect((await check()).code).toBe(1)
  }, 90_000)

  it('exits 2 for a single process in memory unless --single-replica is given, and then on since, and 2 when the admin API is unreachable', async () => {
    const memory = await startGateway(testConfig(sim.url, { admin: { token: ADMIN_TOKEN } }))
    const replica = await runCli(['sunset-check', '--admin', memory.adminUrl, '--tenant', 'acme'], env)
    expect(replica.code).toBe(2)
    expect(replica.stderr).toContain('--single-replica')
    const vouched = await runCli(['sunset-check', '--admin', memory.adminUrl, '--tenant', 'acme', '--single-replica', '--quiet-days', '1'], env)
    expect(vouched.code).toBe(2)
    expect(vouched.stderr).toContain('complete only since')
    const adminUrl = memory.adminUrl
    await memory.close()
    const unreachable = await runCli(['sunset-check', '--admin', adminUrl, '--tenant', 'acme'], env)
    expect(unreachable.code).toBe(2)
    expect(unreachable.stderr).toContain('could not be reached')
  }, 60_000)

  it('exits 2, saying why, for a token file it cannot read and for a 200 that is not JSON (a login page on the way), and report exits 1', async () => {
    const loginPage = await startHttpServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end('<html>sign in</html>'))
    const missing = `${dir.path}/no-such-token`
    const [noFile, notJson, reportNoFile] = await Promise.all([
      runCli(['sunset-check', '--admin', loginPage.url, '--tenant', 'acme', '--token-file', missing]),
      runCli(['sunset-check', '--admin', loginPage.url, '--tenant', 'acme'], env),
      runCli(['report', '--admin', loginPage.url, '--token-file', missing])
    ])
    expect(noFile.code).toBe(2)
    expect(noFile.stderr).toContain(`--token-file ${missing} could not be read (ENOENT)`)
    expect(notJson.code).toBe(2)
    expect(notJson.stderr).toContain('not JSON (text/html)')
    expect(notJson.stderr).not.toContain(ADMIN_TOKEN)
    expect(reportNoFile.code).toBe(1)
    expect(reportNoFile.stderr).toContain('could not be read (ENOENT)')
  }, 60_000)

  it('exits 2 for a 200 in JSON that is not a migration answer (something on the way rewrote it), not 1 as if a client had called', async () => {
    const route = { requests: 1, lastSeen: '2026-11-01T00:00:00.000Z', lastSeenNonExempt: '2026-11-01T00:00:00.000Z', clients: [] }
    const shapes = [
      { schemaVersion: 2, scope: 'fleet', tenants: null },
      // A since that is no instant compared false against the cutoff: exit 0, "complete since null".
      { schemaVersion: 2, scope: 'fleet', tenants: { acme: { since: null, routes: { 'POST /v1/headless/runs': route } } } },
      { schemaVersion: 2, scope: 'fleet', tenants: { acme: { since: 'unknown', routes: { 'POST /v1/headless/runs': route } } } },
      { schemaVersion: 2, scope: 'fleet', tenants: { acme: { since: '2026-11-01T00:00:00.000Z', routes: { 'POST /v1/headless/runs': { requests: 1, lastSeen: null, lastSeenNonExempt: '2026-11-29T00:00:00.000Z' } } } } }
    ]
    for (const shape of shapes) {
      const rewritten = await startHttpServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(shape)))
      const check = await runCli(['sunset-check', '--admin', rewritten.url, '--tenant', 'acme'], env)
      expect(check.code).toBe(2)
      expect(check.stderr).toContain('not a migration answer')
    }
  }, 60_000)

  it('report exits 1 in one line for a migration answer missing what its Markdown and CSV read (an older replica), not a stack trace', async () => {
    const client = { clientId: 'fp:0123456789abcdef', label: null, requests: 1, lastSeen: '2026-11-01T00:00:00.000Z', exemptUntil: null }
    const route = { requests: 1, lastSeen: '2026-11-01T00:00:00.000Z', lastSeenNonExempt: '2026-11-01T00:00:00.000Z', clients: [client] }
    // What sunset-check judges on is there; configHashes, legacyShare and the rest are not.
    const partial = { schemaVersion: 2, scope: 'fleet', tenants: { acme: { since: '2026-10-01T00:00:00.000Z', routes: { 'POST /v1/headless/runs': route } } } }
    const older = await startHttpServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(partial)))
    for (const format of ['md', 'csv']) {
      const report = await runCli(['report', '--admin', older.url, '--format', format], env)
      expect(report.code).toBe(1)
      expect(report.stderr).toContain('not a migration answer')
      expect(report.stderr).not.toMatch(/\n\s+at /)
    }
    const json = await runCli(['report', '--admin', older.url, '--format', 'json'], env)
    expect(json.code).toBe(0)
  }, 60_000)

  it('exits 2 for an answer that breaks off after its head (a replica restarting), not 1 as if a client had called; report exits 1', async () => {
    const cut = await startHttpServer((request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': '5000' })
      response.write('{"schemaVersion":2,"scope":"fleet","tenants":{"acme":')
      // The head and part of the body are out: then the connection goes.
      setTimeout(() => request.socket.destroy(), 50)
    })
    const [check, report] = await Promise.all([runCli(['sunset-check', '--admin', cut.url, '--tenant', 'acme'], env), runCli(['report', '--admin', cut.url], env)])
    expect(check.code).toBe(2)
    expect(check.stderr).toContain("cannot tell (exit 2): the admin API's answer broke off before its end (UND_ERR_SOCKET)")
    expect(report.code).toBe(1)
    expect(report.stderr).toContain("the admin API's answer broke off before its end")
    for (const output of [check.stderr, report.stderr]) {
      expect(output).not.toContain(ADMIN_TOKEN)
      // A clear line, not a stack trace.
      expect(output).not.toMatch(/\n\s+at /)
    }
  }, 60_000)
})

describe('v4gw calendar (SPEC 13)', () => {
  const now = Date.now()
  const first = Date.UTC(new Date(now).getUTCFullYear() + 1, 2, 2, 14)
  const config = {
    tenants: {
      acme: {
        upstream: { staging: 'embedded' },
        legacy: {
          deprecation: {
            date: iso(now - 30 * DAY),
            sunset: iso(first + 90 * DAY),
            afterSunset: 'gone',
            brownouts: { windows: [{ start: iso(first), end: iso(first + HOUR) }], escalation: { first: iso(first + 7 * DAY), everyMs: 7 * DAY, durationsMs: [HOUR, 4 * HOUR] }, clients: 25 }
          }
        },
        migration: { routes: { 'POST /v1/runs/invoke': { deprecation: { sunset: iso(first + 120 * DAY), brownouts: null } } } }
      }
    }
  }

  it('prints every window and sunset as iCalendar: one VEVENT each, UTC times, CRLF line ends, lines folded at 75 octets', async () => {
    const file = await dir.write('calendar.yaml', stringify(config))
    const result = await runCli(['calendar', '--config', file])
    expect(result.code).toBe(0)
    const ics = result.stdout
    expect(ics.startsWith('BEGIN:VCALENDAR\r\nVERSION:2.0\r\n')).toBe(true)
    expect(ics.endsWith('END:VCALENDAR\r\n')).toBe(true)
    expect(ics.replace(/\r\n/g, '')).not.toMatch(/[\r\n]/)
    for (const line of ics.split('\r\n')) expect(Buffer.byteLength(line)).toBeLessThanOrEqual(75)
    // Three windows and the tenant's sunset, and the route's own sunset (its windows are none).
    expect(ics.match(/BEGIN:VEVENT/g)).toHaveLength(5)
    const utc = (ms: number): string => iso(ms).replace(/[-:]/g, '').replace('.000', '')
    expect(ics).toContain(`DTSTART:${utc(first)}\r\nDTEND:${utc(first + HOUR)}\r\n`)
    expect(ics).toContain(`DTSTART:${utc(first + 14 * DAY)}\r\nDTEND:${utc(first + 14 * DAY + 4 * HOUR)}\r\n`)
    expect(ics).toContain(`DTSTART:${utc(first + 120 * DAY)}\r\n`)
    // Unfolded, the summary names the tenant and route.
    expect(ics.replace(/\r\n /g, '')).toContain('SUMMARY:Legacy API sunset (tenant acme\\, POST /v1/runs/invoke)')
    expect(ics.replace(/\r\n /g, '')).toContain('SUMMARY:Legacy API brownout (tenant acme\\, legacy routes except POST /v1/runs/invoke)')
  })

  it('refuses a --tenant the config does not have, one named like an object property included (64)', async () => {
    const file = await dir.write('calendar-unknown.yaml', stringify(config))
    for (const tenant of ['nobody', 'constructor']) {
      const result = await runCli(['calendar', '--config', file, '--tenant', tenant])
      expect(result.code).toBe(64)
      expect(result.stderr).toContain(`the config has no tenant "${tenant}"`)
    }
  })

  it('prints a Markdown table with --format md', async () => {
    const file = await dir.write('calendar-md.yaml', stringify(config))
    const result = await runCli(['calendar', '--config', file, '--format', 'md', '--tenant', 'acme'])
    expect(result.code).toBe(0)
    expect(result.stdout).toContain('| tenant | routes | event | starts | ends | who |')
    // The route with a schedule of its own (no windows) is not in the tenant's windows, and they say so.
    expect(result.stdout).toContain(`| acme | all legacy routes except POST /v1/runs/invoke | brownout | ${iso(first).slice(0, 16).replace('T', ' ')} UTC | ${iso(first + HOUR).slice(0, 16).replace('T', ' ')} UTC | 25 % of clients |`)
    expect(result.stdout).toContain('| acme | POST /v1/runs/invoke | sunset |')
  })
})

describe('check-config and reload warnings about client ids (SPEC 12, 17)', () => {
  const sim = useSimulator()

  it('warns for every hdr: id in exempt, allow or deny, and not for fp: ids', async () => {
    const now = Date.now()
    const file = await dir.write(
      'hdr-ids.yaml',
      stringify({
        tenants: {
          acme: {
            upstream: { staging: 'embedded' },
            clients: { key: ['header:x-client-id', 'credential'] },
            legacy: { deprecation: { date: iso(now - DAY), exempt: [{ client: 'hdr:billing-batch', until: iso(now + DAY) }, { client: clientIdOf('t'), until: iso(now + DAY) }] } },
            migration: {
              canary: { percent: 10, allow: ['hdr:canary-friend', clientIdOf('t')], deny: ['hdr:fragile'] },
              routes: { 'POST /v1/runs/invoke': { deprecation: { exempt: [{ client: 'hdr:reporting', until: iso(now + DAY) }] } } }
            }
          }
        }
      })
    )
    const result = await runCli(['check-config', file])
    expect(result.code).toBe(0)
    const warnings = result.stdout.split('\n').filter((line) => line.includes('warning:'))
    expect(warnings).toHaveLength(4)
    const text = warnings.join('\n')
    expect(text).toContain('tenants.acme.legacy.deprecation.exempt.0.client: hdr:billing-batch is a header id')
    expect(text).toContain('tenants.acme.migration.canary.allow.0: hdr:canary-friend')
    expect(text).toContain('tenants.acme.migration.canary.deny.0: hdr:fragile')
    expect(text).toContain('hdr:reporting')
    expect(text).not.toContain(clientIdOf('t'))
  })

  it('logs a warning when a reload changes clients.key', async () => {
    const raw = testConfig(sim.url)
    const file = await dir.write('reload-key.yaml', stringify(raw))
    const gw = await startGateway(raw, { configPath: file })
    await dir.write('reload-key.yaml', stringify(testConfig(sim.url, { tenants: { acme: { upstream: { staging: sim.url }, clients: { key: ['header:x-client-id', 'credential'] } } } })))
    const reloaded = await send(gw.adminUrl, '/admin/reload', { method: 'POST' })
    expect(reloaded.json.status).toBe('reloaded')
    const warning = gw.logs.lines().find((line) => line.msg === 'clients.key changed: every client id of this tenant changes')
    expect(warning).toMatchObject({ level: 40, tenant: 'acme', before: ['credential'], after: ['header:x-client-id', 'credential'] })
  })
})
