import { hash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { send, type Answer } from '../helpers/http.js'
import { until, useRedisServer } from '../helpers/redis-server.js'
import { startGateway, testConfig, useGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

/**
 * SPEC 12's client registry and `GET /admin/migration` against the real gateway and the built-in
 * simulator; fleet-wide with two gateways on one real redis-server. Dates computed from now.
 */
const HOUR = 3_600_000
const DAY = 24 * HOUR
const iso = (ms: number): string => new Date(ms).toISOString()
const clientIdOf = (token: string): string => `fp:${hash('sha256', token, 'hex').slice(0, 16)}`
const ALICE = { authorization: 'Bearer demo-token-alice' }
const BOB = { authorization: 'Bearer demo-token-bob' }
const HEADLESS = 'POST /v1/headless/runs'
const ROUTES = [HEADLESS, 'POST /v1/runs/invoke', 'POST /v1/runs/:runId/invoke']

function call(gateway: StartedGateway, headers: Record<string, string>): Promise<Answer> {
  return send(gateway.url, '/v1/headless/runs', { headers, json: { input: 1 } })
}

async function migration(gateway: StartedGateway, query = ''): Promise<Answer> {
  return send(gateway.adminUrl, `/admin/migration${query}`)
}

describe('GET /admin/migration (SPEC 12, schemaVersion 2)', () => {
  const sim = useSimulator()
  const now = Date.now()
  const windowStart = now + 20 * DAY
  const gw = useGateway(() =>
    testConfig(sim.url, {
      tenants: {
        acme: {
          upstream: { staging: sim.url },
          clients: { labels: { [clientIdOf('demo-token-alice')]: { name: 'billing-batch', owner: 'team-billing' }, [clientIdOf('demo-token-bob')]: 'reporting' } },
          legacy: {
            deprecation: {
              date: iso(now - 30 * DAY),
              sunset: iso(now + 60 * DAY),
              brownouts: { windows: [{ start: iso(windowStart), end: iso(windowStart + HOUR) }] },
              exempt: [{ client: clientIdOf('demo-token-bob'), until: iso(now + 10 * DAY), reason: 'contract ACME-42' }]
            }
          }
        },
        quiet: { upstream: { staging: sim.url } }
      }
    })
  )

  it('lists every configured legacy route of every tenant, an unused one with requests 0 and lastSeen null', async () => {
    const answer = await migration(gw)
    expect(answer.status).toBe(200)
    expect(answer.json).toMatchObject({ schemaVersion: 2, scope: 'replica', configHashes: [expect.stringMatching(/^[0-9a-f]{12}$/)] })
    expect(Date.parse(answer.json.generatedAt)).toBeGreaterThan(Date.now() - 60_000)
    expect(Object.keys(answer.json.tenants).sort()).toEqual(['acme', 'quiet'])
    const quiet = answer.json.tenants.quiet
    expect(quiet).toMatchObject({ stage: 'translate', legacyShare: [], overrides: [], brownoutPause: null })
    expect(Date.parse(quiet.since)).toBeLessThanOrEqual(Date.now())
    expect(Object.keys(quiet.routes)).toEqual(ROUTES)
    expect(quiet.routes[HEADLESS]).toEqual({
      stage: 'translate',
      stageSource: 'config',
      canary: null,
      requests: 0,
      lastSeen: null,
      lastSeenNonExempt: null,
      distinctClients: 0,
      clientsListed: 0,
      clientsEvicted: 0,
      days: [],
      deprecation: null,
      brownoutPause: null,
      clients: []
    })
  })

  it('shows each client with its label, owner, user agent, counts and exemption, the deprecation with its next windows, and lastSeenNonExempt ignoring the exempt client', async () => {
    await call(gw, { ...ALICE, 'user-agent': 'billing/1.0' })
    const lastNonExempt = Date.now()
    await call(gw, { ...BOB, 'user-agent': 'reports/3.1' })
    const answer = await migration(gw, '?tenant=acme')
    expect(Object.keys(answer.json.tenants)).toEqual(['acme'])
    const route = answer.json.tenants.acme.routes[HEADLESS]
    expect(route).toMatchObject({ requests: 2, distinctClients: 2, clientsListed: 2, clientsEvicted: 0 })
    expect(Date.parse(route.lastSeenNonExempt)).toBeLessThanOrEqual(lastNonExempt)
    expect(Date.parse(route.lastSeen)).toBeGreaterThanOrEqual(Date.parse(route.lastSeenNonExempt))
    expect(route.days).toEqual([{ day: iso(Date.now()).slice(0, 10), requests: 2, clients: 2 }])
    expect(route.deprecation).toEqual({ date: iso(now - 30 * DAY), sunset: iso(now + 60 * DAY), afterSunset: 'serve', nextBrownouts: [{ start: iso(windowStart), end: iso(windowStart + HOUR) }] })
    expect(route.clients).toEqual([
      { clientId: clientIdOf('demo-token-bob'), label: 'reporting', owner: null, userAgent: 'reports/3.1', requests: 1, firstSeen: expect.any(String), lastSeen: expect.any(String), lastBrownout: null, exemptUntil: iso(now + 10 * DAY) },
      { clientId: clientIdOf('demo-token-alice'), label: 'billing-batch', owner: 'team-billing', userAgent: 'billing/1.0', requests: 1, firstSeen: expect.any(String), lastSeen: expect.any(String), lastBrownout: null, exemptUntil: null }
    ])
    expect(answer.json.tenants.acme.legacyShare).toEqual([{ day: iso(Date.now()).slice(0, 10), legacy: 2, native: 0 }])
  })

  it('shows a user agent sent as UTF-8 as its text, not as its bytes one character each', async () => {
    const text = 'Überweisung-Client/1.0 (Zürich) ✓'
    // On the wire as UTF-8: undici writes a header's characters as latin1 bytes.
    expect((await call(gw, { ...ALICE, 'user-agent': Buffer.from(text, 'utf8').toString('latin1') })).status).toBe(200)
    const clients = (await migration(gw, '?tenant=acme')).json.tenants.acme.routes[HEADLESS].clients
    expect(clients).toEqual(expect.arrayContaining([expect.objectContaining({ clientId: clientIdOf('demo-token-alice'), userAgent: text })]))
    // Bytes that are no UTF-8 are ISO-8859-1 (RFC 9110 5.5), as an older client may send them: 0xFC is ü.
    expect((await call(gw, { ...BOB, 'user-agent': 'Zürich-Client/2' })).status).toBe(200)
    const again = (await migration(gw, '?tenant=acme')).json.tenants.acme.routes[HEADLESS].clients
    expect(again).toEqual(expect.arrayContaining([expect.objectContaining({ clientId: clientIdOf('demo-token-bob'), userAgent: 'Zürich-Client/2' })]))
  })

  it('lists at most ?clients=N clients per route, most recent first, and refuses a count above 10,000', async () => {
    await call(gw, ALICE)
    const one = await migration(gw, '?tenant=acme&clients=1')
    expect(one.json.tenants.acme.routes[HEADLESS]).toMatchObject({ clientsListed: 1, distinctClients: 2, clients: [{ clientId: clientIdOf('demo-token-alice') }] })
    expect((await migration(gw, '?clients=0')).json.tenants.acme.routes[HEADLESS].clients).toEqual([])
    for (const bad of ['10001', '-1', 'many', '1.5']) {
      const refused = await migration(gw, `?clients=${bad}`)
      expect({ bad, status: refused.status, code: refused.json.error.code }).toEqual({ bad, status: 400, code: 'INVALID_REQUEST' })
    }
  })

  it('answers 404 TENANT_UNKNOWN for a tenant that is not configured, without echoing its name', async () => {
    const answer = await migration(gw, '?tenant=no-such-tenant')
    expect(answer.status).toBe(404)
    expect(answer.json.error.code).toBe('TENANT_UNKNOWN')
    expect(answer.text).not.toContain('no-such-tenant')
  })

  it("shows a tenant's pause as its brownoutPause and a route's pause on that route", async () => {
    const until = iso(Date.now() + HOUR)
    await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', until, reason: 'incident 9' } })
    await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', route: 'POST /v1/runs/invoke', until, reason: 'route incident' } })
    const answer = await migration(gw, '?tenant=acme')
    expect(answer.json.tenants.acme.brownoutPause).toMatchObject({ tenant: 'acme', route: null, until, reason: 'incident 9' })
    expect(answer.json.tenants.acme.routes['POST /v1/runs/invoke'].brownoutPause).toMatchObject({ route: 'POST /v1/runs/invoke', reason: 'route incident' })
    expect(answer.json.tenants.acme.routes[HEADLESS].brownoutPause).toBeNull()
  })
})

describe('the client registry during a brownout (SPEC 12, 13)', () => {
  const sim = useSimulator()
  it("records a browned-out request as the client's lastBrownout", async () => {
    const now = Date.now()
    const gw = await startGateway(
      testConfig(sim.url, {
        tenants: { acme: { upstream: { staging: sim.url }, legacy: { deprecation: { date: iso(now - 30 * DAY), brownouts: { windows: [{ start: iso(now - HOUR), end: iso(now + HOUR) }] } } } } }
      })
    )
    expect((await call(gw, ALICE)).status).toBe(410)
    const client = (await migration(gw)).json.tenants.acme.routes[HEADLESS].clients[0]
    expect(client.clientId).toBe(clientIdOf('demo-token-alice'))
    expect(Date.parse(client.lastBrownout)).toBeGreaterThan(now - 60_000)
  })
})

describe('the client registry of a fleet on one Redis (SPEC 12)', () => {
  const redis = useRedisServer()
  const sim = useSimulator()
  const config = (): Record<string, unknown> => testConfig(sim.url, { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'reg:' }, flushMs: 200 } })
  const a = useGateway(config)
  const b = useGateway(config)

  async function headless(gateway: StartedGateway): Promise<Record<string, unknown> & { requests: number; distinctClients: number }> {
    const answer = await migration(gateway, '?tenant=acme')
    return { scope: answer.json.scope, since: answer.json.tenants.acme.since, ...answer.json.tenants.acme.routes[HEADLESS] }
  }

  it('answers since no earlier than the tenant\'s retention reaches back, whatever the store\'s first write', async () => {
    // A store written to for 200 days, of a tenant whose counts live 7: older data is gone, so
    // the answer is complete only from 7 days ago (a client quiet for 10 days would else read as
    // never seen since the first write, and pass sunset-check).
    await redis.client().set('retention:r:since', String(Date.now() - 200 * DAY))
    const gateway = await startGateway(
      testConfig(sim.url, { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'retention:' }, flushMs: 200 }, tenants: { acme: { upstream: { staging: sim.url }, clients: { retentionDays: 7 } } } })
    )
    await call(gateway, ALICE)
    const answer = await migration(gateway, '?tenant=acme')
    expect(answer.json.scope).toBe('fleet')
    expect(Math.abs(Date.parse(answer.json.tenants.acme.since) - (Date.parse(answer.json.generatedAt) - 7 * DAY))).toBeLessThan(1_000)
  })

  it('answers the sum of every replica with scope fleet, since the store first write', async () => {
    await call(a, ALICE)
    await call(a, ALICE)
    await call(b, BOB)
    await send(b.url, '/v4/execute', { headers: BOB, json: { input: 1 } })
    // b writes within its flushMs; a answers with its own counts written first.
    await until(async () => (await headless(a)).requests === 3, 5_000)
    const route = await headless(a)
    expect(route).toMatchObject({ scope: 'fleet', requests: 3, distinctClients: 2, clientsListed: 2 })
    // `?clients=0` lists none from the store too (ZREVRANGE's stop -1 would list them all).
    expect((await migration(a, '?tenant=acme&clients=0')).json.tenants.acme.routes[HEADLESS]).toMatchObject({ clientsListed: 0, clients: [] })
    expect(Date.parse(route.since as string)).toBeLessThanOrEqual(Date.now())
    const answer = await migration(a, '?tenant=acme')
    expect(answer.json.tenants.acme.legacyShare).toEqual([{ day: iso(Date.now()).slice(0, 10), legacy: 3, native: 1 }])
    expect(answer.json.configHashes).toHaveLength(1)
    // The family of its own, with a TTL (retention in Redis too), but for the route's sunset
    // evidence, which no volatile-* eviction may take (docs/decisions.md).
    expect(await redis.client().ttl(`reg:r:acme:c:${HEADLESS}`)).toBeGreaterThan(89 * 24 * 3_600)
    expect(await redis.client().ttl(`reg:r:acme:m:${HEADLESS}`)).toBe(-1)
  })

  it('answers scope local while Redis is away, counts the requests it served without it, and adds them to the store when it is back', async () => {
    const before = (await headless(a)).requests
    // Answering from the fleet, b writes what it held first: its own counts start again from here.
    const flushedFrom = Date.now()
    expect((await headless(b)).scope).toBe('fleet')
    const killedAt = Date.now()
    await redis.kill()
    await until(async () => (await headless(a)).scope === 'local', 5_000)
    await call(a, ALICE)
    await call(b, BOB)
    await call(b, { authorization: 'Bearer demo-token-carol' })
    const local = await headless(b)
    expect(local).toMatchObject({ scope: 'local', requests: 2, distinctClients: 2 })
    // SPEC 12: a local answer holds what this replica has not written to the store: complete from
    // its last write before the outage, not from its process start.
    expect(Date.parse(local.since as string)).toBeGreaterThanOrEqual(flushedFrom)
    expect(Date.parse(local.since as string)).toBeLessThanOrEqual(killedAt)
    const metrics = (await send(b.adminUrl, '/metrics')).text
    expect(Number(/^v4gw_store_unavailable_total\{feature="registry"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2)

    // An empty server: what was in it is gone; the replicas write back what they counted meanwhile.
    await redis.restart()
    await until(async () => (await headless(a)).scope === 'fleet', 10_000)
    await until(async () => (await headless(a)).requests === 3, 5_000)
    const merged = await headless(a)
    expect(merged).toMatchObject({ scope: 'fleet', requests: 3, distinctClients: 3 })
    expect(before).toBeGreaterThanOrEqual(3)
  })
})
