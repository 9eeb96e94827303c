import { hash } from 'node:crypto'
import { writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { answerJson, startFaultUpstream } from '../helpers/fault-upstream.js'
import { send } from '../helpers/http.js'
import { expectGatewayError } from '../helpers/gateway-error.js'
import { useSimulatorGateway } from '../helpers/simulator-gateway.js'
import { runCli } from '../helpers/spawn-cli.js'
import { startGateway, testConfig } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

/** SPEC 13 against the real gateway and the built-in simulator, with dates computed from now. */
const HOUR = 3_600_000
const DAY = 24 * HOUR
const NOW = Date.now()
const iso = (ms: number): string => new Date(ms).toISOString()
const ALICE = { authorization: 'Bearer demo-token-alice' }
const BOB = { authorization: 'Bearer demo-token-bob' }
const clientIdOf = (token: string): string => `fp:${hash('sha256', token, 'hex').slice(0, 16)}`

const WINDOW_END = iso(NOW + HOUR)
const SUNSET = iso(NOW + 30 * DAY)

function deprecatedTenant(simulatorUrl: string, deprecation: Record<string, unknown> = {}, migration: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    upstream: { staging: simulatorUrl },
    legacy: {
      deprecation: {
        date: iso(NOW - 30 * DAY),
        sunset: SUNSET,
        link: 'https://docs.example.com/v4',
        sunsetLink: 'https://docs.example.com/sunset-policy',
        brownouts: { windows: [{ start: iso(NOW - HOUR), end: WINDOW_END }] },
        exempt: [{ client: clientIdOf('demo-token-bob'), until: iso(NOW + DAY), reason: 'contract ACME-42' }],
        ...deprecation
      }
    },
    migration
  }
}

const FIXED_LINKS = '<https://docs.example.com/v4>; rel="deprecation", <https://docs.example.com/sunset-policy>; rel="sunset"'

describe('a route that removes single deprecation and canary keys of its tenant with null (SPEC 14: key by key)', () => {
  const { gw } = useSimulatorGateway((url) => ({
    tenants: {
      acme: deprecatedTenant(
        url,
        { brownouts: null },
        { routes: { 'POST /v1/runs/invoke': { deprecation: { sunset: null, sunsetLink: null, exempt: null } }, 'POST /v1/runs/:runId/invoke': { canary: { allow: null } } } }
      )
    }
  }))

  it('keeps Deprecation and its link on the route, without the tenant\'s Sunset and sunset link', async () => {
    const kept = await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
    expect(kept.headers.sunset).toBe(new Date(SUNSET).toUTCString())
    const removed = await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'no-sunset' } })
    expect(removed.status).toBe(200)
    expect(removed.headers.deprecation).toBe(`@${Math.floor((NOW - 30 * DAY) / 1000)}`)
    expect(removed.headers.sunset).toBeUndefined()
    expect(removed.headers.link).toContain('<https://docs.example.com/v4>; rel="deprecation"')
    expect(removed.headers.link).not.toContain('rel="sunset"')
  })
})

describe('deprecation and brownouts on the traffic listener (SPEC 13)', () => {
  const { sim, gw } = useSimulatorGateway((url) => ({
    tenants: { acme: deprecatedTenant(url, {}, { routes: { 'POST /v1/runs/invoke': { deprecation: { brownouts: null } } } }) }
  }))

  it('answers 410 LEGACY_BROWNOUT in an open window with error.migration, the deprecation headers and no Retry-After, forwarding nothing', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-request-id': 'brownout-line-1' }, json: { input: 1 } })
    expectGatewayError(answer, 410, 'LEGACY_BROWNOUT', ['migration'])
    // SPEC 17: the access line carries the deprecation outcome.
    expect(gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'brownout-line-1')).toMatchObject({ deprecation: 'brownout', status: 410, error: 'LEGACY_BROWNOUT' })
    expect(answer.json.error).toMatchObject({
      code: 'LEGACY_BROWNOUT',
      migration: { windowEnd: WINDOW_END, sunset: SUNSET, successor: '/v4/execute', link: 'https://docs.example.com/v4' }
    })
    expect(answer.headers['retry-after']).toBeUndefined()
    expect(answer.headers.deprecation).toBe(`@${Math.floor((NOW - 30 * DAY) / 1000)}`)
    expect(answer.headers.sunset).toBe(new Date(SUNSET).toUTCString())
    expect(answer.headers.link).toBe(`${FIXED_LINKS}, </v4/execute>; rel="successor-version"`)
    expect(sim.simulator.calls).toEqual([])
  })

  it('puts the deprecation headers on a legacy request the kernel refuses for its head (a transfer coding, two Hosts), and counts it', async () => {
    const raw = (head: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const { port } = new URL(gw.url)
        const socket = connect(Number(port), '127.0.0.1', () => socket.end(head))
        let text = ''
        socket.setEncoding('latin1').on('data', (chunk: string) => (text += chunk)).on('end', () => resolve(text)).on('error', reject)
      })
    // No brownout decision is made for a request refused for its head: no exemption spared it (docs/decisions.md).
    const headerOnly = async (): Promise<number> =>
      Number(/^v4gw_legacy_deprecation_total\{tenant="acme",route="POST \/v1\/headless\/runs",action="header"\} (\d+)$/m.exec((await send(gw.adminUrl, '/metrics')).text)?.[1] ?? 0)
    const bobsRequests = async (): Promise<number> => {
      const migration = await send(gw.adminUrl, '/admin/migration?tenant=acme')
      const clients = migration.json.tenants.acme.routes['POST /v1/headless/runs'].clients as { clientId: string; requests: number }[]
      return clients.find((client) => client.clientId === clientIdOf('demo-token-bob'))?.requests ?? 0
    }
    const [headerBefore, bobBefore] = [await headerOnly(), await bobsRequests()]
    const heads = [
      `POST /v1/headless/runs HTTP/1.1\r\nHost: gw\r\nAuthorization: ${BOB.authorization}\r\nTransfer-Encoding: gzip, chunked\r\nContent-Type: application/json\r\n\r\n0\r\n\r\n`,
      `POST /v1/headless/runs HTTP/1.1\r\nHost: gw\r\nHost: other\r\nAuthorization: ${BOB.authorization}\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"input":1}`
    ]
    for (const head of heads) {
      const answer = await raw(head)
      expect(answer).toMatch(/^HTTP\/1\.1 400 /)
      expect(answer).toMatch(/\r\ndeprecation: @\d+\r\n/i)
      expect(answer).toMatch(/\r\nsunset: /i)
      expect(answer).toContain('rel="successor-version"')
      expect(answer).toMatch(/\r\nconnection: close\r\n/i)
    }
    // SPEC 12: counted under its client, as every legacy request, refused ones included; and in SPEC 13's counter.
    await until(() => gw.logs.lines().filter((entry) => entry.msg === 'request' && entry.status === 400 && entry.route === 'POST /v1/headless/runs').length === 2)
    await until(async () => (await bobsRequests()) === bobBefore + 2)
    expect(await headerOnly()).toBe(headerBefore + 2)
  })

  it('serves an exempt client during the window, with the headers', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: BOB, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(answer.headers.link).toBe(`${FIXED_LINKS}, </v4/execute>; rel="successor-version"`)
  })

  it('names the session the answer was given in as the successor-version, on a route whose own deprecation has no brownouts', async () => {
    const answer = await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'dep-1' } })
    expect(answer.status).toBe(200)
    const sessionId = answer.headers['x-v4-session-id'] as string
    expect(answer.headers.link).toBe(`${FIXED_LINKS}, </v4/sessions/${encodeURIComponent(sessionId)}/executions.execute>; rel="successor-version"`)
  })

  it('puts the deprecation headers on the gateway\'s own errors of a legacy route', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...BOB, 'content-type': 'text/plain' }, body: 'x' })
    expect(answer.status).toBe(415)
    expect(answer.headers.deprecation).toMatch(/^@\d+$/)
    expect(answer.headers.link).toContain('rel="successor-version"')
  })

  it('never puts them on native /v4 answers', async () => {
    const answer = await send(gw.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(answer.headers.deprecation).toBeUndefined()
    expect(answer.headers.link).toBeUndefined()
  })

  it('stops the brownout while a pause holds, logs the admin change, and resumes it on DELETE', async () => {
    const paused = await send(gw.adminUrl, '/admin/brownouts/pause', { headers: { 'x-request-id': 'pause-1' }, json: { tenant: 'acme', until: iso(Date.now() + HOUR), reason: 'incident 12: a partner cannot deploy' } })
    expect(paused.status).toBe(200)
    expect(paused.json).toMatchObject({ pause: { tenant: 'acme', route: null, reason: 'incident 12: a partner cannot deploy', setAt: expect.any(String) }, scope: 'replica' })
    const line = gw.logs.lines().find((entry) => entry.msg === 'admin change' && entry.requestId === 'pause-1')
    expect(line).toMatchObject({ level: 40, endpoint: 'POST /admin/brownouts/pause', body: { tenant: 'acme', reason: 'incident 12: a partner cannot deploy' } })
    expect((await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(200)
    const resumed = await send(gw.adminUrl, '/admin/brownouts/pause?tenant=acme', { method: 'DELETE' })
    expect(resumed.json).toMatchObject({ pause: { tenant: 'acme', route: null }, scope: 'replica' })
    expect((await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(410)
  })

  it('pauses one route only', async () => {
    await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', route: 'POST /v1/headless/runs', until: iso(Date.now() + HOUR), reason: 'route pause' } })
    expect((await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(200)
    expect((await send(gw.url, '/v1/runs/dep-2/invoke', { headers: ALICE, json: { input: 1 } })).status).toBe(410)
    await send(gw.adminUrl, '/admin/brownouts/pause?tenant=acme&route=POST%20/v1/headless/runs', { method: 'DELETE' })
    expect((await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(410)
  })

  it('refuses a pause of an unknown tenant (404), an unknown route (404), one more than 30 days ahead (400 /until) and a non-JSON body (415)', async () => {
    const until = iso(Date.now() + HOUR)
    expect((await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'ghost', until, reason: 'r' } })).json.error.code).toBe('TENANT_UNKNOWN')
    expect((await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', route: 'GET /v1/nope', until, reason: 'r' } })).json.error.code).toBe('ROUTE_NOT_FOUND')
    const far = await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', until: iso(Date.now() + 31 * DAY), reason: 'r' } })
    expect(far.status).toBe(400)
    expect(far.json.error.details).toEqual([{ pointer: '/until', message: expect.any(String) }])
    const noReason = await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', until } })
    expect(noReason.json.error.details).toEqual([expect.objectContaining({ pointer: '/reason' })])
    expect((await send(gw.adminUrl, '/admin/brownouts/pause', { headers: { 'content-type': 'text/plain' }, body: 'pause' })).status).toBe(415)
  })
})

describe('after an enforced sunset (SPEC 13)', () => {
  const { sim, gw } = useSimulatorGateway((url) => ({
    tenants: { acme: deprecatedTenant(url, { date: iso(NOW - 60 * DAY), sunset: iso(NOW - DAY), afterSunset: 'gone', brownouts: null }) }
  }))

  it('answers 410 LEGACY_GONE with error.migration without windowEnd to a client not exempt, and serves an exempt one', async () => {
    const gone = await send(gw.url, '/v1/runs/invoke', { headers: { ...ALICE, 'x-request-id': 'gone-line-1' }, json: { input: 1 } })
    expectGatewayError(gone, 410, 'LEGACY_GONE', ['migration'])
    // SPEC 13/17: the action is `gone`, not `brownout`, on the access line and the metric.
    const goneLine = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'gone-line-1')
    await until(() => goneLine() !== undefined)
    expect(goneLine()).toMatchObject({ deprecation: 'gone', status: 410, error: 'LEGACY_GONE' })
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/^v4gw_legacy_deprecation_total\{tenant="acme",route="POST \/v1\/runs\/invoke",action="gone"\} 1$/m)
    // SPEC 12: a gone answer is no brownout, so the registry keeps no lastBrownout for it.
    const clients = (await send(gw.adminUrl, '/admin/migration')).json.tenants.acme.routes['POST /v1/runs/invoke'].clients
    expect(clients.find((client: { clientId: string }) => client.clientId === clientIdOf('demo-token-alice'))).toMatchObject({ lastBrownout: null })
    // The same error.migration as a brownout's but windowEnd (SPEC 13): sunset, successor, link.
    expect(gone.json.error.migration).toEqual({ sunset: iso(NOW - DAY), successor: '/v4/sessions.start', link: 'https://docs.example.com/v4' })
    expect(gone.json.error.migration.windowEnd).toBeUndefined()
    expect(gone.headers['retry-after']).toBeUndefined()
    expect(gone.headers.link).toContain('</v4/sessions.start>; rel="successor-version"')
    expect(sim.simulator.calls).toEqual([])
    expect((await send(gw.url, '/v1/runs/invoke', { headers: BOB, json: { input: 1 } })).status).toBe(200)
  })

  it('serves everyone while the tenant is paused', async () => {
    await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', until: iso(Date.now() + HOUR), reason: 'emergency' } })
    expect((await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1 } })).status).toBe(200)
  })
})

describe('brownouts across a reload and in check-config (SPEC 13)', () => {
  const dir = useTempDir('v4gw-brownouts-')
  const sim = useSimulator()

  it('lists upcomingBrownouts in the reload answer and log, and keeps a pause across the reload', async () => {
    const path = join(dir.path, 'gateway.yaml')
    const config = testConfig(sim.url, { tenants: { acme: deprecatedTenant(sim.url) } })
    await writeFile(path, stringify(config))
    const gateway = await startGateway(config, { configPath: path })
    await send(gateway.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', until: iso(Date.now() + HOUR), reason: 'hold' } })
    const soon = { start: iso(NOW + 2 * HOUR), end: iso(NOW + 3 * HOUR) }
    const later = { start: iso(NOW + 2 * DAY), end: iso(NOW + 2 * DAY + HOUR) }
    await writeFile(path, stringify(testConfig(sim.url, { tenants: { acme: deprecatedTenant(sim.url, { brownouts: { windows: [{ start: iso(NOW - HOUR), end: WINDOW_END }, soon, later] } }) } })))
    const reload = await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })
    expect(reload.json.upcomingBrownouts).toEqual([
      { tenant: 'acme', route: null, start: iso(NOW - HOUR), end: WINDOW_END },
      { tenant: 'acme', route: null, ...soon }
    ])
    expect(gateway.logs.lines().find((line) => line.msg === 'config reloaded')?.upcomingBrownouts).toHaveLength(2)
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(200)
  })

  it('check-config prints each tenant\'s and route\'s next five windows and the exemptions that expired', async () => {
    const ladder = { first: iso(NOW + 20 * DAY), everyMs: DAY, durationsMs: [HOUR, HOUR, HOUR, HOUR, HOUR, HOUR] }
    const path = await dir.write('check.yaml', stringify({
      tenants: {
        acme: {
          ...deprecatedTenant('http://127.0.0.1:4010', { brownouts: { escalation: ladder, clients: 25 }, exempt: [{ client: 'fp:0123456789abcdef', until: iso(NOW - DAY) }] }, { routes: { 'POST /v1/runs/invoke': { deprecation: null } } })
        }
      }
    }))
    const result = await runCli(['check-config', path])
    expect(result.code).toBe(0)
    const windows = Array.from({ length: 5 }, (_, n) => `${iso(NOW + 20 * DAY + n * DAY)} to ${iso(NOW + 20 * DAY + n * DAY + HOUR)}`)
    expect(result.stdout).toContain(`next brownouts (25% of clients): ${windows.join(', ')}\n`)
    expect(result.stdout).not.toContain(iso(NOW + 25 * DAY))
    expect(result.stdout).toContain(`exemption of fp:0123456789abcdef expired ${iso(NOW - DAY)}: it is ignored`)
    expect(result.stdout).toMatch(/POST \/v1\/runs\/invoke: session-execute.*\n( {6}.*\n)*? {6}no deprecation on this route\n/)
  })
})

describe('x-v4gw-served-by on a tenant whose migration block holds only a deprecation (SPEC 14)', () => {
  const sim = useSimulator()

  it('is on every legacy answer once the tenant sets a migration block, whatever it holds, and not without one', async () => {
    const deprecation = { date: iso(NOW - DAY), link: 'https://docs.example.com/v4' }
    const gw = await startGateway(
      testConfig(sim.url, {
        tenancy: { default: 'plain' },
        tenants: {
          plain: { upstream: { staging: sim.url }, legacy: { deprecation } },
          routed: { upstream: { staging: sim.url }, migration: { routes: { 'POST /v1/headless/runs': { deprecation } } } }
        }
      })
    )
    const plain = await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-tenant-id': 'plain' }, json: { input: 1 } })
    const routed = await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-tenant-id': 'routed' }, json: { input: 1 } })
    expect([plain.status, routed.status]).toEqual([200, 200])
    expect(plain.headers.deprecation).toBeDefined()
    expect(plain.headers['x-v4gw-served-by']).toBeUndefined()
    expect(routed.headers.deprecation).toBeDefined()
    expect(routed.headers['x-v4gw-served-by']).toBe('v4')
  })
})

// SPEC 4 step 6 and SPEC 13: once an execution went out in a session, the gateway's own answer
// (a 504) names the session and links it as the successor, as V4's answer would; a keyed
// request's kept 504 and its replay say the same.
describe('the gateway\'s own answer after a session-execute\'s execution went out', () => {
  it('names the session in x-v4-session-id and its successor-version, kept and replayed alike', async () => {
    const upstream = await startFaultUpstream((exchange) => {
      if (exchange.url === '/v4/sessions.start') answerJson(exchange, 201, { sessionId: 'sess/504' })
    })
    const tenant = deprecatedTenant(upstream.url, { brownouts: null })
    ;(tenant.legacy as Record<string, unknown>).idempotency = {}
    const gw = await startGateway(testConfig(upstream.url, { limits: { upstreamTimeoutMs: 200 }, tenants: { acme: tenant } }))
    const sessionLink = `${FIXED_LINKS}, </v4/sessions/${encodeURIComponent('sess/504')}/executions.execute>; rel="successor-version"`
    const plain = await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'dep-504' } })
    expectGatewayError(plain, 504, 'UPSTREAM_TIMEOUT')
    expect(plain.headers['x-v4-session-id']).toBe('sess/504')
    expect(plain.headers.link).toBe(sessionLink)
    const keyed = { ...ALICE, 'idempotency-key': 'dep-504-key' }
    const first = await send(gw.url, '/v1/runs/invoke', { headers: keyed, json: { input: 2, stateId: 'dep-504' } })
    const replay = await send(gw.url, '/v1/runs/invoke', { headers: keyed, json: { input: 2, stateId: 'dep-504' } })
    expectGatewayError(first, 504, 'UPSTREAM_TIMEOUT')
    expect(replay.headers['idempotent-replayed']).toBe('true')
    for (const answer of [first, replay]) {
      expect(answer.headers['x-v4-session-id']).toBe('sess/504')
      expect(answer.headers.link).toBe(sessionLink)
    }
  })

  it('names no session when the start answered and the execution never went out (its upstream refused it)', async () => {
    let starts = 0
    const upstream = await startFaultUpstream((exchange) => {
      starts++
      answerJson(exchange, 201, { sessionId: 'sess-gone' })
      // The execution finds the upstream gone: it is never written.
      void upstream.close()
    })
    const gw = await startGateway(testConfig(upstream.url, { tenants: { acme: deprecatedTenant(upstream.url, { brownouts: null }) } }))
    const answer = await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'never-sent' } })
    expect(starts).toBe(1)
    // The start was answered: its session is mapped; the execution is what never went out.
    expect((await send(gw.adminUrl, '/admin/sessions')).json.total).toBe(1)
    expectGatewayError(answer, 502, 'UPSTREAM_UNAVAILABLE')
    expect(answer.headers['x-v4-session-id']).toBeUndefined()
    expect(answer.headers.link).toBe(`${FIXED_LINKS}, </v4/sessions.start>; rel="successor-version"`)
  })
})
