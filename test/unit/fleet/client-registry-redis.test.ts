import { describe, expect, it } from 'vitest'
import { ClientRegistry, type LegacySample, type RegistryBounds } from '../../../src/fleet/client-registry.js'
import type { StoreLogger } from '../../../src/store/redis-connection.js'
import { createSharedStore, type SharedStore } from '../../../src/store/shared-store.js'
import { useRedisServer } from '../../helpers/redis-server.js'
import { ownedByTest } from '../../helpers/teardown.js'

/**
 * SPEC 12's registry on a real redis-server, one replica: what its answers and its last write
 * hold when the store misbehaves in ways a socket can show (a full store that refuses writes, a
 * write still under way when the replica stops). No flush runs on a timer (an hour apart).
 */
const ROUTE = 'POST /v1/runs/invoke'
const QUIET = { info: () => undefined, warn: () => undefined }
const HOUR = 3_600_000
const BOUNDS: RegistryBounds = { maxTotal: 100_000, forTenant: () => ({ maxPerRoute: 10_000, retentionDays: 90 }) }
const redis = useRedisServer()
let prefixes = 0

function sample(clientId: string, route = ROUTE): LegacySample {
  return { tenant: 'acme', route, clientId, userAgent: 'old-sdk/1.0', exempt: false, brownout: false, atMs: Date.now() }
}

async function replica(prefix: string, writePartClients?: number, bounds = BOUNDS): Promise<{ store: SharedStore; registry: ClientRegistry; unavailable: () => number }> {
  let unavailable = 0
  const store = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: prefix, logger: QUIET, onUnavailable: () => unavailable++ }), (shared) => shared.close())
  const registry = new ClientRegistry({ store, bounds, flushMs: HOUR, configHash: () => 'h', logger: QUIET, writePartClients })
  return { store, registry, unavailable: () => unavailable }
}

async function routeOf(registry: ClientRegistry) {
  const view = await registry.view(new Map([['acme', [ROUTE]]]), 100)
  return { scope: view.scope, sinceMs: view.sinceMs, route: view.tenants.get('acme')?.routes.get(ROUTE) }
}

describe('the client registry on Redis (SPEC 12)', () => {
  it('answers local, not fleet, while the store answers reads but refuses its writes (full with noeviction), and writes what it held once it takes them', async () => {
    const { registry, unavailable } = await replica(`crr${++prefixes}:`)
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa'))
    expect(await routeOf(registry)).toMatchObject({ scope: 'fleet', route: { requests: 1 } })
    const refusedFrom = Date.now()
    await redis.client().config('SET', 'maxmemory', '1')
    try {
      registry.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb'))
      const refused = await routeOf(registry)
      // The store still holds the first request only; this replica's own count since its last write is what it can vouch for.
      expect(refused).toMatchObject({ scope: 'local', route: { requests: 1, distinctClients: 1 } })
      expect(refused.sinceMs).toBeLessThanOrEqual(refusedFrom)
      registry.recordLegacy(sample('fp:cccccccccccccccc'))
      expect(unavailable()).toBe(1)
    } finally {
      await redis.client().config('SET', 'maxmemory', '0')
    }
    expect(await routeOf(registry)).toMatchObject({ scope: 'fleet', route: { requests: 3, distinctClients: 3 } })
    await registry.close()
  })

  it('says, when it stops while the store refuses its writes, how many requests the fleet\'s registry misses', async () => {
    const warnings: Array<[Record<string, unknown>, string]> = []
    const logger: StoreLogger = { info: () => undefined, warn: ((fields: Record<string, unknown>, message: string) => void warnings.push([fields, message])) as StoreLogger['warn'] }
    const store = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: `crr${++prefixes}:`, logger: QUIET }), (shared) => shared.close())
    const registry = new ClientRegistry({ store, bounds: BOUNDS, flushMs: HOUR, configHash: () => 'h', logger })
    await redis.client().config('SET', 'maxmemory', '1')
    try {
      registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa'))
      registry.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb'))
      registry.recordNative('acme', Date.now())
      await registry.close()
    } finally {
      await redis.client().config('SET', 'maxmemory', '0')
    }
    const lost = warnings.find(([, message]) => message.includes('before it stopped'))
    expect(lost?.[0]).toMatchObject({ legacyRequests: 2, nativeRequests: 1 })
  })

  it('says nothing of the kind when it stops with everything written', async () => {
    const warnings: string[] = []
    const logger: StoreLogger = { info: () => undefined, warn: ((_fields: unknown, message: string) => void warnings.push(message)) as StoreLogger['warn'] }
    const store = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: `crr${++prefixes}:`, logger: QUIET }), (shared) => shared.close())
    const registry = new ClientRegistry({ store, bounds: BOUNDS, flushMs: HOUR, configHash: () => 'h', logger })
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa'))
    await registry.close()
    expect(warnings).toEqual([])
  })

  it('counts distinct clients exactly while the store lists them all (PFCOUNT alone reads them about 0.8 % off)', async () => {
    const { registry } = await replica(`crr${++prefixes}:`)
    for (let index = 0; index < 3_000; index++) registry.recordLegacy(sample(`hdr:client-${index}`))
    expect(await routeOf(registry)).toMatchObject({ scope: 'fleet', route: { requests: 3_000, distinctClients: 3_000, clientsEvicted: 0 } })
    await registry.close()
  })

  it('keeps distinctClients when memory pressure evicts the client list (it has a TTL) and the next write lists one client again', async () => {
    const prefix = `crr${++prefixes}:`
    const { registry } = await replica(prefix)
    for (let index = 0; index < 500; index++) registry.recordLegacy(sample(`hdr:client-${index}`))
    expect((await routeOf(registry)).route?.distinctClients).toBe(500)
    // What volatile-lru takes first: the keys with a TTL, the list and the records; the summary has none.
    await redis.client().del(`${prefix}r:acme:z:${ROUTE}`, `${prefix}r:acme:c:${ROUTE}`)
    registry.recordLegacy(sample('hdr:client-7'))
    const { route } = await routeOf(registry)
    expect(route?.clients).toHaveLength(1)
    // The HyperLogLog's 500, about: not capped at the one client listed.
    expect(route?.distinctClients).toBeGreaterThan(450)
    await registry.close()
  })

  it('drops the client records left behind when memory pressure evicted the list alone: nothing could trim or list them again', async () => {
    const prefix = `crr${++prefixes}:`
    const { registry } = await replica(prefix)
    for (let index = 0; index < 50; index++) registry.recordLegacy(sample(`hdr:client-${index}`))
    await registry.flush()
    await redis.client().del(`${prefix}r:acme:z:${ROUTE}`)
    registry.recordLegacy(sample('hdr:client-new'))
    const { route } = await routeOf(registry)
    expect(route?.clients.map((client) => client.clientId)).toEqual(['hdr:client-new'])
    expect(await redis.client().hkeys(`${prefix}r:acme:c:${ROUTE}`)).toEqual(['hdr:client-new'])
    await registry.close()
  })

  it('bounds distinctClients from below only on a route written before ids were counted (no listed in its summary)', async () => {
    const prefix = `crr${++prefixes}:`
    const { registry } = await replica(prefix)
    for (let index = 0; index < 300; index++) registry.recordLegacy(sample(`hdr:client-${index}`))
    await registry.flush()
    await redis.client().hdel(`${prefix}r:acme:m:${ROUTE}`, 'listed')
    await redis.client().del(`${prefix}r:acme:z:${ROUTE}`, `${prefix}r:acme:c:${ROUTE}`)
    registry.recordLegacy(sample('hdr:client-new'))
    const { route } = await routeOf(registry)
    expect(route?.distinctClients).toBeGreaterThan(250)
    await registry.close()
  })

  it('keeps in distinctClients the clients the retention trimmed from the store\'s list, as PFCOUNT does', async () => {
    const { registry } = await replica(`crr${++prefixes}:`, undefined, { maxTotal: 100_000, forTenant: () => ({ maxPerRoute: 10_000, retentionDays: 1 }) })
    for (let index = 0; index < 5; index++) registry.recordLegacy({ ...sample(`hdr:gone-${index}`), atMs: Date.now() - 2 * 86_400_000 })
    for (let index = 0; index < 5; index++) registry.recordLegacy(sample(`hdr:here-${index}`))
    const { route } = await routeOf(registry)
    expect(route?.clients).toHaveLength(5)
    expect(route?.distinctClients).toBe(10)
    await registry.close()
  })

  it('writes, when it stops, what it counted while a write was under way, not only what that write took', async () => {
    const prefix = `crr${++prefixes}:`
    const { registry } = await replica(prefix)
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa'))
    // The write of the first request waits on a server that does not answer yet (under the 1 s command timeout).
    redis.pause()
    const underWay = registry.flush()
    registry.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb'))
    const closing = registry.close()
    setTimeout(() => redis.resume(), 200)
    await Promise.all([underWay, closing])
    const { registry: reader } = await replica(prefix)
    expect(await routeOf(reader)).toMatchObject({ scope: 'fleet', route: { requests: 2, distinctClients: 2 } })
    await reader.close()
  })

  it('writes a large delta in parts, and keeps for the next write only what the store refused and the parts after it, never what it took', async () => {
    const prefix = `crr${++prefixes}:`
    const other = 'POST /v1/headless/runs'
    const third = 'POST /v1/runs/:runId/invoke'
    // One client per part: [ROUTE's counts and client, other's counts], [other's client, third's counts], [third's client].
    const { registry } = await replica(prefix, 1)
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa'))
    registry.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb', other))
    registry.recordLegacy(sample('fp:cccccccccccccccc', third))
    // The second route's client hash is of another type: the store refuses that route's script in the second part, and takes the third route's counts beside it.
    const broken = `${prefix}r:acme:c:${other}`
    await redis.client().set(broken, 'not a hash')
    // With a list beside it, as a route written before has: records without a list are dropped.
    await redis.client().zadd(`${prefix}r:acme:z:${other}`, Date.now(), 'fp:bbbbbbbbbbbbbbbb')
    const beforeWrites = Date.now()
    await registry.flush()
    // The first part is in the store: the replica's own counts are whole only from that write on.
    expect((await registry.view(new Map([['acme', [ROUTE]]]), 100)).sinceMs).toBeGreaterThanOrEqual(beforeWrites)
    await registry.flush()
    await redis.client().del(broken)
    await registry.flush()
    const view = await registry.view(new Map([['acme', [ROUTE, other, third]]]), 100)
    expect(view.scope).toBe('fleet')
    // Each request once: the first part, taken at the first flush, was not sent again; the third, after the refused one, was kept and sent.
    for (const label of [ROUTE, other, third]) expect(view.tenants.get('acme')?.routes.get(label)).toMatchObject({ requests: 1, distinctClients: 1, clients: [expect.objectContaining({ requests: 1 })] })
    expect(view.tenants.get('acme')?.share).toEqual([{ day: new Date().toISOString().slice(0, 10), legacy: 3, native: 0 }])
    await registry.close()
  })

  // Written whole, and in parts of one client record each (the evicted ids go with the route's
  // counts in its first part, where they are weighed before any of its clients is written):
  // the counts come out the same.
  it.each([undefined, 1])('counts a client its delta evicted as evicted once, and not at all when the store still lists it (parts of %s)', async (partClients) => {
    const { registry } = await replica(`crr${++prefixes}:`, partClients, { maxTotal: 100_000, forTenant: () => ({ maxPerRoute: 2, retentionDays: 90 }) })
    registry.recordLegacy(sample('fp:aaaaaaaaaaaaaaaa'))
    await registry.flush()
    // The store lists a; the next delta sees a, b and c, and drops a (its least recent) to hold two.
    for (const letter of 'abc') registry.recordLegacy(sample(`fp:${letter.repeat(16)}`))
    await registry.flush()
    const { route } = await routeOf(registry)
    // Three clients, two listed: one eviction (the store's trim of a), not two.
    expect(route).toMatchObject({ requests: 4, distinctClients: 3, clientsEvicted: 1 })
    expect(route?.clients).toHaveLength(2)
    // A delta's eviction of a client the store never listed still counts.
    for (const letter of 'def') registry.recordLegacy(sample(`fp:${letter.repeat(16)}`))
    await registry.flush()
    expect((await routeOf(registry)).route).toMatchObject({ requests: 7, distinctClients: 6, clientsEvicted: 4 })
    await registry.close()
  })

  it('reads a route unused for its whole retention as unused, as the memory registry does, though its summary has no TTL', async () => {
    const { registry } = await replica(`crr${++prefixes}:`)
    const longAgo = Date.now() - 100 * 24 * HOUR
    registry.recordLegacy({ ...sample('fp:aaaaaaaaaaaaaaaa'), atMs: longAgo })
    await registry.flush()
    expect((await routeOf(registry)).route).toMatchObject({ requests: 0, lastSeenMs: null, lastSeenNonExemptMs: null })
    // Called again: it starts over, the old count not added.
    registry.recordLegacy(sample('fp:bbbbbbbbbbbbbbbb'))
    await registry.flush()
    expect((await routeOf(registry)).route).toMatchObject({ requests: 1, distinctClients: 1 })
    await registry.close()
  })

  it('counts in the fleet\'s distinct clients, per route and per day, the clients its delta evicted before it was written', async () => {
    // Two clients listed per route: a burst of five in one flush window leaves three out of the listing.
    const { registry } = await replica(`crr${++prefixes}:`, undefined, { maxTotal: 100_000, forTenant: () => ({ maxPerRoute: 2, retentionDays: 90 }) })
    for (const letter of 'abcde') registry.recordLegacy(sample(`fp:${letter.repeat(16)}`))
    const { route } = await routeOf(registry)
    expect(route).toMatchObject({ requests: 5, distinctClients: 5 })
    expect(route?.clients).toHaveLength(2)
    expect(route?.days).toEqual([{ day: new Date().toISOString().slice(0, 10), requests: 5, clients: 5 }])
    await registry.close()
  })
})
