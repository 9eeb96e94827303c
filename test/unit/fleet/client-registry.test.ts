import { describe, expect, it } from 'vitest'
import { boundsFromConfig, ClientRegistry, type LegacySample, type RegistryBounds } from '../../../src/fleet/client-registry.js'
import { configSchema, type GatewayConfig } from '../../../src/config/schema.js'
import { HyperLogLog } from '../../../src/fleet/hyperloglog.js'
import { DAY_MS, dayOf, RegistryData } from '../../../src/fleet/registry-data.js'
import { viewOfData } from '../../../src/fleet/registry-view.js'
import { memorySharedStore } from '../../../src/store/shared-store.js'

const ROUTE = 'POST /v1/runs/invoke'
const SILENT = { info: () => undefined, warn: () => undefined }

function bounds(maxPerRoute = 10_000, maxTotal = 100_000, retentionDays = 90): RegistryBounds {
  return { maxTotal, forTenant: () => ({ maxPerRoute, retentionDays }) }
}

function sample(clientId: string, atMs: number, extra: Partial<LegacySample> = {}): LegacySample {
  return { tenant: 'acme', route: ROUTE, clientId, userAgent: 'old-sdk/1.0', exempt: false, brownout: false, atMs, ...extra }
}

async function viewOf(registry: ClientRegistry, clients = 100) {
  const view = await registry.view(new Map([['acme', [ROUTE]]]), clients)
  return { view, route: view.tenants.get('acme')?.routes.get(ROUTE) }
}

describe('the client registry in memory (SPEC 12)', () => {
  it('counts requests and distinct clients per route, lists clients most recently seen first, and answers with scope replica since the process start', async () => {
    const startedMs = Date.now()
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(), flushMs: 2_000, configHash: () => 'hash-1', logger: SILENT })
    const now = Date.now()
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 3_000))
    registry.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb', now - 2_000, { userAgent: 'other/2.0' }))
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 1_000, { brownout: true }))
    const { view, route } = await viewOf(registry)
    expect(view.scope).toBe('replica')
    expect(view.sinceMs).toBeGreaterThanOrEqual(startedMs)
    expect(view.configHashes).toEqual(['hash-1'])
    expect(route).toMatchObject({ requests: 3, lastSeenMs: now - 1_000, lastSeenNonExemptMs: now - 1_000, distinctClients: 2, clientsEvicted: 0 })
    expect(route?.clients.map((client) => [client.clientId, client.requests, client.lastBrownoutMs])).toEqual([
      ['fp:aaaaaaaaaaaaaaaa', 2, now - 1_000],
      ['fp:bbbbbbbbbbbbbbbb', 1, null]
    ])
    expect(route?.clients[0]?.firstSeenMs).toBe(now - 3_000)
    await registry.close()
  })

  it('counts distinct clients exactly while it lists them all, and within what it listed and let go once it evicted some', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(5_000), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    const now = Date.now()
    // 3,000 ids: the HyperLogLog alone reads a few dozen off (about 1.6 % standard error).
    for (let index = 0; index < 3_000; index++) registry.recordLegacy(sample(`hdr:client-${index}`, now - 10_000 + index))
    expect((await viewOf(registry, 0)).route).toMatchObject({ distinctClients: 3_000, clientsEvicted: 0 })
    const evicting = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(100), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    for (let index = 0; index < 130; index++) evicting.recordLegacy(sample(`hdr:client-${index}`, now - 10_000 + index))
    const { route } = await viewOf(evicting, 0)
    expect(route?.clientsEvicted).toBe(30)
    expect(route?.distinctClients).toBeGreaterThanOrEqual(100)
    expect(route?.distinctClients).toBeLessThanOrEqual(130)
    await registry.close()
    await evicting.close()
  })

  it('keeps in distinctClients the clients the retention took from the list, as the HyperLogLog does', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(10_000, 100_000, 1), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    const now = Date.now()
    for (let index = 0; index < 5; index++) registry.recordLegacy(sample(`hdr:gone-${index}`, now - 2 * DAY_MS))
    for (let index = 0; index < 5; index++) registry.recordLegacy(sample(`hdr:here-${index}`, now))
    const { route } = await viewOf(registry)
    expect(route?.clients).toHaveLength(5)
    expect(route?.distinctClients).toBe(10)
    await registry.close()
  })

  it('lists clients by when they were last seen, not by when their request finished: a long call seen first is listed after a short one seen later', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    const now = Date.now()
    // B arrived 10 s after A and finished first: recorded first.
    registry.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb', now - 20_000))
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 30_000))
    expect((await viewOf(registry)).route?.clients.map((client) => client.clientId)).toEqual(['fp:bbbbbbbbbbbbbbbb', 'fp:aaaaaaaaaaaaaaaa'])
    expect((await viewOf(registry, 1)).route?.clients.map((client) => client.clientId)).toEqual(['fp:bbbbbbbbbbbbbbbb'])
    await registry.close()
  })

  it('keeps lastSeenNonExempt at the last request of a client that was not exempt then', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    const now = Date.now()
    registry.recordLegacy(sample('anonymous', now - 5_000))
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 1_000, { exempt: true }))
    const { route } = await viewOf(registry)
    expect(route).toMatchObject({ lastSeenMs: now - 1_000, lastSeenNonExemptMs: now - 5_000 })
    await registry.close()
  })

  it('evicts the client seen least recently when a route is full and counts it in clientsEvicted', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(3), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    const now = Date.now()
    for (const [index, id] of ['fp:0000000000000001', 'fp:0000000000000002', 'fp:0000000000000003'].entries()) registry.recordLegacy(sample(id, now - 10_000 + index))
    // The first is seen again: the second is now the least recent.
    registry.recordLegacy(sample('fp:0000000000000001', now - 5_000))
    registry.recordLegacy(sample('fp:0000000000000004', now - 4_000))
    const { route } = await viewOf(registry)
    expect(route?.clients.map((client) => client.clientId)).toEqual(['fp:0000000000000004', 'fp:0000000000000001', 'fp:0000000000000003'])
    expect(route).toMatchObject({ clientsEvicted: 1, distinctClients: 4, requests: 5 })
    await registry.close()
  })

  it('keeps at most clients.maxTotal client records over every route', () => {
    const data = new RegistryData(Date.now(), bounds(10_000, 5))
    const now = Date.now()
    for (let index = 0; index < 8; index++) data.recordLegacy(sample(`hdr:client-${index}`, now + index, { route: index % 2 === 0 ? 'GET /a' : 'GET /b' }))
    expect(data.clientCount).toBe(5)
    const routes = data.tenants.get('acme')?.routes
    expect((routes?.get('GET /a')?.clientsEvicted ?? 0) + (routes?.get('GET /b')?.clientsEvicted ?? 0)).toBe(3)
  })

  it('applies bounds a reload lowered: the least recent clients go at once, and a new client is kept, not dropped', () => {
    const limits = { maxPerRoute: 6, maxTotal: 10 }
    const data = new RegistryData(Date.now(), { get maxTotal() { return limits.maxTotal }, forTenant: () => ({ maxPerRoute: limits.maxPerRoute, retentionDays: 90 }) })
    const now = Date.now()
    for (let index = 0; index < 6; index++) data.recordLegacy(sample(`hdr:a-${index}`, now + index, { route: 'GET /a' }))
    for (let index = 0; index < 3; index++) data.recordLegacy(sample(`hdr:b-${index}`, now + index, { route: 'GET /b' }))
    const ids = (route: string): string[] => [...(data.tenants.get('acme')?.routes.get(route)?.clients.keys() ?? [])]
    limits.maxPerRoute = 4
    data.applyBounds()
    expect(ids('GET /a')).toEqual(['hdr:a-2', 'hdr:a-3', 'hdr:a-4', 'hdr:a-5'])
    expect(data.clientCount).toBe(7)
    // Lowered with nothing to retain (bounds read per request): the next new client makes room for itself.
    limits.maxPerRoute = 2
    data.recordLegacy(sample('hdr:a-new', now + 100, { route: 'GET /a' }))
    expect(ids('GET /a')).toEqual(['hdr:a-5', 'hdr:a-new'])
    limits.maxTotal = 3
    data.recordLegacy(sample('hdr:b-new', now + 200, { route: 'GET /b' }))
    expect(data.clientCount).toBe(3)
    expect(ids('GET /b')).toContain('hdr:b-new')
    expect(data.tenants.get('acme')?.routes.get('GET /b')?.clientsEvicted).toBeGreaterThan(0)
  })

  it('lists the requests and distinct clients of each UTC day and the tenant legacy share, native requests included', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    const now = Date.now()
    const yesterday = now - DAY_MS
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', yesterday))
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now))
    registry.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb', now))
    registry.recordNative('acme', now)
    const { view, route } = await viewOf(registry)
    const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10)
    expect(route?.days).toEqual([
      { day: day(yesterday), requests: 1, clients: 1 },
      { day: day(now), requests: 2, clients: 2 }
    ])
    expect(view.tenants.get('acme')?.share).toEqual([
      { day: day(yesterday), legacy: 1, native: 0 },
      { day: day(now), legacy: 2, native: 1 }
    ])
    await registry.close()
  })

  it('leaves traffic of a UTC day older than the last 30 out of the days and the legacy share it answers', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    const now = Date.now()
    // Within the 90 days' retention: the route and its client stay, only the day is too old to list.
    const longAgo = now - 40 * DAY_MS
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', longAgo))
    registry.recordNative('acme', longAgo)
    registry.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb', now))
    const { view, route } = await viewOf(registry)
    const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10)
    expect(route?.days).toEqual([{ day: day(now), requests: 1, clients: 1 }])
    expect(view.tenants.get('acme')?.share).toEqual([{ day: day(now), legacy: 1, native: 0 }])
    expect(route).toMatchObject({ requests: 2, distinctClients: 2 })
    await registry.close()
  })

  it('keeps the days of the last 30 (today and the 29 before) in memory and in the answer, and drops older ones as new days come and at each sweep', () => {
    // Noon UTC, fixed: each sample lands a whole number of days from the answer's day.
    const now = Date.parse('2026-11-26T12:00:00Z')
    const day = (ms: number): string => new Date(ms).toISOString().slice(0, 10)
    const daysHeld = (data: RegistryData) => ({
      route: [...(data.tenants.get('acme')?.routes.get(ROUTE)?.days.keys() ?? [])].sort((a, b) => a - b).map((number) => day(number * DAY_MS)),
      share: [...(data.tenants.get('acme')?.share.keys() ?? [])].sort((a, b) => a - b).map((number) => day(number * DAY_MS))
    })
    const oldestKept = now - 29 * DAY_MS
    const firstDropped = now - 30 * DAY_MS

    // In order of time: each new day pushes out the one that fell out of the 30.
    const flowing = new RegistryData(now - 60 * DAY_MS, bounds())
    for (const atMs of [now - 40 * DAY_MS, firstDropped, oldestKept, now]) {
      flowing.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', atMs))
      flowing.recordNative('acme', atMs)
    }
    expect(daysHeld(flowing)).toEqual({ route: [day(oldestKept), day(now)], share: [day(oldestKept), day(now)] })
    const answer = viewOfData(flowing, ['acme'], 100, now).get('acme')
    expect(answer?.routes.get(ROUTE)?.days).toEqual([
      { day: day(oldestKept), requests: 1, clients: 1 },
      { day: day(now), requests: 1, clients: 1 }
    ])
    expect(answer?.share).toEqual([
      { day: day(oldestKept), legacy: 1, native: 1 },
      { day: day(now), legacy: 1, native: 1 }
    ])
    // The totals are not per day: the requests of the dropped days still count.
    expect(answer?.routes.get(ROUTE)?.requests).toBe(4)

    // No traffic since: the sweep alone lets the days go, as the clock passes them.
    const quiet = new RegistryData(now - 60 * DAY_MS, bounds())
    quiet.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', firstDropped))
    quiet.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', oldestKept))
    quiet.recordNative('acme', oldestKept)
    quiet.sweep(now)
    expect(daysHeld(quiet)).toEqual({ route: [day(oldestKept)], share: [day(oldestKept)] })
    quiet.sweep(now + DAY_MS)
    expect(daysHeld(quiet)).toEqual({ route: [], share: [] })
    // The route and its client are within the retention (90 days): kept, with their totals.
    expect(quiet.tenants.get('acme')?.routes.get(ROUTE)?.requests).toBe(2)
    expect(quiet.clientCount).toBe(1)
  })

  it('splits a delta into parts of at most N clients for writing: a route\'s counts in its first part only, every client once', () => {
    const data = new RegistryData(Date.now(), bounds(), true)
    const now = Date.now()
    for (let index = 0; index < 2_500; index++) data.recordLegacy(sample(`fp:${index.toString(16).padStart(16, '0')}`, now))
    data.recordLegacy(sample('fp:ffffffffffffffff', now, { route: 'POST /v1/headless/runs' }))
    data.recordNative('acme', now)
    const parts = data.parts(1_000)
    expect(parts.map((part) => part.clientCount)).toEqual([1_000, 1_000, 501])
    const routeIn = (part: RegistryData, label: string) => part.tenants.get('acme')?.routes.get(label)
    expect(parts.map((part) => routeIn(part, ROUTE)?.requests)).toEqual([2_500, 0, 0])
    expect(parts.map((part) => routeIn(part, 'POST /v1/headless/runs')?.requests)).toEqual([undefined, undefined, 1])
    expect(parts.map((part) => part.tenants.get('acme')?.share.size ?? 0)).toEqual([1, 0, 0])
    const ids = parts.flatMap((part) => [...(part.tenants.get('acme')?.routes.values() ?? [])].flatMap((route) => [...route.clients.keys()]))
    expect(new Set(ids).size).toBe(2_501)
    expect(data.parts(10_000)).toHaveLength(1)
  })

  it('keeps a client\'s first seen, last brownout and days right when a long request that arrived first is recorded last', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    const now = Date.now()
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 10_000, { brownout: true }))
    // Arrived 20 s before the first recorded request (browned out too), finished after it.
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 30_000, { brownout: true }))
    const client = (await viewOf(registry)).route?.clients[0]
    expect(client).toMatchObject({ requests: 2, firstSeenMs: now - 30_000, lastSeenMs: now - 10_000, lastBrownoutMs: now - 10_000 })
    await registry.close()
    // For the store, the late request's own day is the one held, not the last one's again.
    const midnight = Date.parse('2026-11-27T00:00:00Z')
    const delta = new RegistryData(midnight, bounds(), true)
    delta.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', midnight + 1_000))
    delta.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', midnight - 2_000))
    delta.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', midnight - 1_000))
    expect(delta.tenants.get('acme')?.routes.get(ROUTE)?.clients.get('fp:aaaaaaaaaaaaaaaa')?.days).toEqual([dayOf(midnight - 1)])
  })

  it('holds the ids a delta evicted once each, with every day they were seen, and at most maxTotal of them, absorbed deltas included', () => {
    const now = Date.parse('2026-11-26T12:00:00Z')
    const route = (data: RegistryData) => data.tenants.get('acme')?.routes.get(ROUTE)
    const delta = new RegistryData(now, bounds(1, 3), true)
    // One client listed per route: each new one evicts the one before; a and b take turns.
    delta.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - DAY_MS))
    for (const id of ['fp:bbbbbbbbbbbbbbbb', 'fp:aaaaaaaaaaaaaaaa', 'fp:bbbbbbbbbbbbbbbb']) delta.recordLegacy(sample(id, now))
    expect([...(route(delta)?.departed ?? [])]).toEqual([
      ['fp:aaaaaaaaaaaaaaaa', [dayOf(now - DAY_MS), dayOf(now)]],
      ['fp:bbbbbbbbbbbbbbbb', [dayOf(now)]]
    ])
    for (const id of ['fp:cccccccccccccccc', 'fp:dddddddddddddddd', 'fp:eeeeeeeeeeeeeeee']) delta.recordLegacy(sample(id, now))
    // Three ids at most (maxTotal): d's eviction by e is not held.
    expect([...(route(delta)?.departed?.keys() ?? [])]).toEqual(['fp:aaaaaaaaaaaaaaaa', 'fp:bbbbbbbbbbbbbbbb', 'fp:cccccccccccccccc'])
    // A delta kept through a failed write keeps the cap.
    const next = new RegistryData(now, bounds(1, 3), true)
    next.recordLegacy(sample('fp:ffffffffffffffff', now))
    next.recordLegacy(sample('fp:1111111111111111', now))
    next.absorb(delta)
    expect(route(next)?.departed?.size).toBe(3)
  })

  it('cuts a user agent to 256 characters', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    registry.recordLegacy(sample('anonymous', Date.now(), { userAgent: 'x'.repeat(10_000) }))
    const { route } = await viewOf(registry)
    expect(route?.clients[0]?.userAgent).toHaveLength(256)
    await registry.close()
  })

  it('cuts a user agent before a character outside the BMP rather than through it', async () => {
    const registry = new ClientRegistry({ store: memorySharedStore(), bounds: bounds(), flushMs: 2_000, configHash: () => 'h', logger: SILENT })
    // 255 letters, then an emoji (two UTF-16 units) across the 256th: its first half alone is no text.
    registry.recordLegacy(sample('anonymous', Date.now(), { userAgent: `${'x'.repeat(255)}😀tail` }))
    const { route } = await viewOf(registry)
    expect(route?.clients[0]?.userAgent).toBe('x'.repeat(255))
    await registry.close()
  })

  it('forgets clients last seen before the retention, and routes unused as long', () => {
    const data = new RegistryData(Date.now(), bounds(10_000, 100_000, 2))
    const now = Date.now()
    data.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 3 * DAY_MS, { route: 'GET /old' }))
    data.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 3 * DAY_MS))
    data.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb', now))
    data.sweep(now)
    const routes = data.tenants.get('acme')?.routes
    expect(routes?.has('GET /old')).toBe(false)
    expect([...(routes?.get(ROUTE)?.clients.keys() ?? [])]).toEqual(['fp:bbbbbbbbbbbbbbbb'])
    expect(data.clientCount).toBe(1)
  })

  it('merges a delta that could not be written: counts summed, last seen the later, distinct sets merged', () => {
    const now = Date.now()
    const older = new RegistryData(now - 10_000, bounds(), true)
    older.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 9_000))
    older.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb', now - 8_000))
    const newer = new RegistryData(now - 5_000, bounds(), true)
    newer.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 1_000, { userAgent: 'new/2' }))
    newer.absorb(older)
    const route = newer.tenants.get('acme')?.routes.get(ROUTE)
    expect(newer.startMs).toBe(now - 10_000)
    expect(route?.requests).toBe(3)
    expect(route?.distinct.count()).toBe(2)
    expect([...(route?.clients.values() ?? [])].map((client) => [client.id, client.requests, client.firstSeenMs, client.lastSeenMs, client.userAgent])).toEqual([
      ['fp:bbbbbbbbbbbbbbbb', 1, now - 8_000, now - 8_000, 'old-sdk/1.0'],
      ['fp:aaaaaaaaaaaaaaaa', 2, now - 9_000, now - 1_000, 'new/2']
    ])
    expect(newer.clientCount).toBe(2)
  })

  it('keeps the later last-seen and its user agent when the newer delta saw the client last earlier (samples carry their arrival)', () => {
    const now = Date.now()
    const older = new RegistryData(now - 10_000, bounds(), true)
    // A short request that arrived at -4 s, recorded (and its write refused) before a long one that arrived at -6 s.
    older.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 4_000, { userAgent: 'sdk/2' }))
    const newer = new RegistryData(now - 5_000, bounds(), true)
    newer.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now - 6_000, { userAgent: 'sdk/1' }))
    newer.absorb(older)
    const client = newer.tenants.get('acme')?.routes.get(ROUTE)?.clients.get('fp:aaaaaaaaaaaaaaaa')
    expect([client?.requests, client?.firstSeenMs, client?.lastSeenMs, client?.userAgent]).toEqual([2, now - 6_000, now - 4_000, 'sdk/2'])
  })

  it('holds one entry per UTC day for a client however many refused writes its delta absorbs', () => {
    const today = Math.floor(Date.now() / DAY_MS) * DAY_MS
    // Seen yesterday and today, in each of 200 flushes (2 s apart) that Redis refused.
    let held = new RegistryData(today - DAY_MS, bounds(), true)
    held.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', today - DAY_MS + 1_000))
    for (let flush = 0; flush < 200; flush++) {
      const next = new RegistryData(today + flush * 2_000, bounds(), true)
      next.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', today + flush * 2_000 + 1_000))
      next.absorb(held)
      held = next
    }
    const client = held.tenants.get('acme')?.routes.get(ROUTE)?.clients.get('fp:aaaaaaaaaaaaaaaa')
    expect(client?.requests).toBe(201)
    // Its last day is today (from lastSeenMs); the days besides it: yesterday, once.
    expect(client?.days).toEqual([dayOf(today - DAY_MS)])
  })
})

describe('the registry bounds from the running config', () => {
  it('keeps the bounds a tenant last had once a reload removed it, not the defaults', () => {
    const withAcme = configSchema.parse({ tenants: { acme: { upstream: { staging: 'http://127.0.0.1:4010' }, clients: { retentionDays: 7, maxPerRoute: 50 } }, other: { upstream: { staging: 'http://127.0.0.1:4010' } } } }) as GatewayConfig
    const withoutAcme = configSchema.parse({ tenants: { other: { upstream: { staging: 'http://127.0.0.1:4010' } } } }) as GatewayConfig
    let config = withAcme
    const bounds = boundsFromConfig(() => config)
    expect(bounds.forTenant('acme')).toMatchObject({ retentionDays: 7, maxPerRoute: 50 })
    config = withoutAcme
    expect(bounds.forTenant('acme')).toMatchObject({ retentionDays: 7, maxPerRoute: 50 })
    expect(bounds.forTenant('never-configured')).toMatchObject({ retentionDays: 90, maxPerRoute: 10_000 })
  })
})

describe('what a delta holds, for the warning of a replica that stops with it', () => {
  it('counts a route the store refused without its legacy share (the share taken, the route not)', () => {
    const data = new RegistryData(Date.now(), bounds(), true)
    const now = Date.now()
    data.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa', now))
    data.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb', now))
    data.recordNative('acme', now)
    expect(data.requestTotals()).toEqual({ routes: 2, shareLegacy: 2, shareNative: 1 })
    // What `#write` keeps when only the route's script was refused: the route, not the share.
    expect(data.only([{ tenant: 'acme', route: ROUTE }]).requestTotals()).toEqual({ routes: 2, shareLegacy: 0, shareNative: 0 })
  })
})

describe('the in-memory HyperLogLog', () => {
  it('counts small sets exactly and large ones within a few percent', () => {
    const small = new HyperLogLog()
    for (const id of ['anonymous', 'hdr:a', 'hdr:b', 'hdr:a']) small.add(id)
    expect(small.count()).toBe(3)
    const large = new HyperLogLog()
    for (let index = 0; index < 50_000; index++) large.add(`hdr:client-${index}`)
    expect(Math.abs(large.count() - 50_000) / 50_000).toBeLessThan(0.05)
  })
})
