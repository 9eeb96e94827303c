import { describe, expect, it } from 'vitest'
import { ShadowResults, type ShadowOutcome, type ShadowRecord } from '../../../src/fleet/shadow-results.js'
import { createSharedStore, memorySharedStore } from '../../../src/store/shared-store.js'
import { until, useRedisServer } from '../../helpers/redis-server.js'
import { ownedByTest } from '../../helpers/teardown.js'

const QUIET = { info: () => undefined, warn: () => undefined }
const ROUTE = 'POST /v1/headless/runs'
const OTHER_ROUTE = 'POST /v1/runs/invoke'
const ROUTES = new Map([['acme', [ROUTE, OTHER_ROUTE]]])
const HOUR = 3_600_000
const T0 = Date.parse('2026-11-26T10:30:00Z')

function outcome(outcome: ShadowOutcome, atMs = T0, extra: Partial<ShadowRecord> = {}): ShadowRecord {
  return { tenant: 'acme', route: ROUTE, outcome, requestId: `r-${Math.random()}`, atMs, primaryStatus: 200, candidateStatus: 200, ...extra }
}

function memoryResults(onOutcome?: (tenant: string, route: string, outcome: ShadowOutcome) => void): ShadowResults {
  return new ShadowResults({ store: memorySharedStore(), logger: QUIET, flushMs: 2_000, startedAtMs: T0 - HOUR, onOutcome })
}

describe('SPEC 15 shadow results in one replica (store: memory)', () => {
  it('counts every outcome per route, comparisons being those started, and the mismatch rate of those compared', async () => {
    const results = memoryResults()
    for (const name of ['match', 'match', 'match', 'mismatch', 'candidate_error', 'primary_error', 'dropped', 'skipped', 'abandoned'] as const) results.record(outcome(name))
    const answer = await results.answer(ROUTES, T0)
    expect(answer.scope).toBe('replica')
    const route = answer.tenants.acme?.[ROUTE]
    expect(route).toMatchObject({ since: new Date(T0 - HOUR).toISOString(), comparisons: 7, matches: 3, mismatches: 1, candidateErrors: 1, primaryErrors: 1, dropped: 1, skipped: 1, abandoned: 1, mismatchRate: 0.25 })
    expect(route?.last24h).toMatchObject({ comparisons: 7, matches: 3, mismatches: 1, mismatchRate: 0.25 })
    // Every listed route appears, unused ones with zeros.
    expect(answer.tenants.acme?.[OTHER_ROUTE]).toMatchObject({ comparisons: 0, matches: 0, mismatchRate: null, topPointers: [], samples: [] })
  })

  it('keeps the last 24 h apart from the counts since the start', async () => {
    const results = memoryResults()
    results.record(outcome('mismatch', T0 - 30 * HOUR, { pointers: ['/a'] }))
    results.record(outcome('match', T0 - 23 * HOUR))
    results.record(outcome('match', T0))
    const route = (await results.answer(ROUTES, T0)).tenants.acme?.[ROUTE]
    expect(route).toMatchObject({ comparisons: 3, matches: 2, mismatches: 1 })
    expect(route?.last24h).toMatchObject({ comparisons: 2, matches: 2, mismatches: 0, mismatchRate: 0 })
  })

  it('lists the 20 most frequent pointers first and counts a pointer beyond the 100th distinct as #other', async () => {
    const results = memoryResults()
    for (let index = 0; index < 105; index++) results.record(outcome('mismatch', T0, { pointers: [`/p${index}`, '/common'] }))
    const route = (await results.answer(ROUTES, T0)).tenants.acme?.[ROUTE]
    expect(route?.topPointers).toHaveLength(20)
    expect(route?.topPointers[0]).toEqual({ pointer: '/common', count: 105 })
    expect(route?.topPointers[1]).toEqual({ pointer: '#other', count: 6 })
    // The samples name pointers as they were counted.
    expect(route?.samples[0]?.pointers).toEqual(['#other', '/common'])
  })

  it('keeps the 20 most recent samples of what did not match, with statuses and pointers only', async () => {
    const results = memoryResults()
    results.record(outcome('match', T0))
    for (let index = 0; index < 25; index++) results.record(outcome('mismatch', T0 + index * 1000, { requestId: `req-${index}`, candidateStatus: 500, pointers: ['#status'] }))
    results.record(outcome('candidate_error', T0 + 30_000, { requestId: 'req-timeout', candidateStatus: undefined }))
    const samples = (await results.answer(ROUTES, T0 + 60_000)).tenants.acme?.[ROUTE]?.samples ?? []
    expect(samples).toHaveLength(20)
    expect(samples[0]).toEqual({ requestId: 'req-timeout', at: new Date(T0 + 30_000).toISOString(), primaryStatus: 200, candidateStatus: null, pointers: [] })
    expect(samples[1]).toEqual({ requestId: 'req-24', at: new Date(T0 + 24_000).toISOString(), primaryStatus: 200, candidateStatus: 500, pointers: ['#status'] })
  })

  it('resets one route, whose since becomes the reset, and leaves the others', async () => {
    const results = memoryResults()
    results.record(outcome('match'))
    results.record(outcome('match', T0, { route: OTHER_ROUTE }))
    expect(await results.reset('acme', [ROUTE], T0 + 5)).toBe('replica')
    const answer = await results.answer(ROUTES, T0 + 10)
    expect(answer.tenants.acme?.[ROUTE]).toMatchObject({ since: new Date(T0 + 5).toISOString(), comparisons: 0 })
    expect(answer.tenants.acme?.[OTHER_ROUTE]).toMatchObject({ comparisons: 1 })
  })

  it('tells the metric every outcome as it is recorded', () => {
    const heard: string[] = []
    const results = memoryResults((tenant, route, name) => heard.push(`${tenant} ${route} ${name}`))
    results.record(outcome('dropped'))
    expect(heard).toEqual([`acme ${ROUTE} dropped`])
  })
})

describe('SPEC 15 shadow results fleet-wide (real redis-server)', () => {
  const redis = useRedisServer()
  let prefixes = 0

  async function replica(prefix: string): Promise<ShadowResults> {
    const store = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: prefix, logger: QUIET }), (shared) => shared.close())
    return ownedByTest(
      'shadowResults',
      async () => {
        const results = new ShadowResults({ store, logger: QUIET, flushMs: 60_000 })
        await results.start()
        return results
      },
      (results) => results.stop()
    )
  }

  it('gives one fleet answer from two replicas: counts summed, pointers merged, samples of both', async () => {
    const prefix = `sh${++prefixes}:`
    const [a, b] = [await replica(prefix), await replica(prefix)]
    a.record(outcome('match'))
    a.record(outcome('mismatch', T0, { requestId: 'from-a', pointers: ['/output'] }))
    b.record(outcome('mismatch', T0 + 1, { requestId: 'from-b', pointers: ['/output', '#status'] }))
    b.record(outcome('dropped'))
    await a.flush()
    // b has not flushed: its own answer still holds its counts; a's does not yet.
    const fromB = await b.answer(ROUTES, T0 + 10)
    expect(fromB.scope).toBe('fleet')
    expect(fromB.tenants.acme?.[ROUTE]).toMatchObject({ comparisons: 3, matches: 1, mismatches: 2, dropped: 1 })
    await b.flush()
    const route = (await a.answer(ROUTES, T0 + 10)).tenants.acme?.[ROUTE]
    expect(route).toMatchObject({ comparisons: 3, matches: 1, mismatches: 2, dropped: 1, mismatchRate: 2 / 3 })
    expect(route?.last24h).toMatchObject({ comparisons: 3 })
    expect(route?.topPointers).toEqual([
      { pointer: '/output', count: 2 },
      { pointer: '#status', count: 1 }
    ])
    expect(route?.samples.map((sample) => sample.requestId)).toEqual(['from-b', 'from-a'])
  })

  it('writes at stop what was recorded after a flush under way took its batch (SPEC 15: counts are the fleet\'s)', async () => {
    const prefix = `sh${++prefixes}:`
    const results = await replica(prefix)
    results.record(outcome('match'))
    const flushing = results.flush()
    results.record(outcome('mismatch', T0, { requestId: 'after-the-batch' }))
    await results.stop()
    await flushing
    const reader = await replica(prefix)
    expect((await reader.answer(ROUTES, T0 + 10)).tenants.acme?.[ROUTE]).toMatchObject({ comparisons: 2, matches: 1, mismatches: 1 })
  })

  it('counts what a flush begun while the answer reads the store carries: neither in the store read nor lost', async () => {
    const prefix = `sh${++prefixes}:`
    const results = await replica(prefix)
    results.record(outcome('mismatch', T0, { requestId: 'in-flight' }))
    // The answer's read is queued first; the flush takes the unwritten counts and queues its write after it.
    const answering = results.answer(ROUTES, T0 + 10)
    const flushing = results.flush()
    const route = (await answering).tenants.acme?.[ROUTE]
    await flushing
    expect(route).toMatchObject({ comparisons: 1, mismatches: 1 })
    expect((await results.answer(ROUTES, T0 + 10)).tenants.acme?.[ROUTE]).toMatchObject({ comparisons: 1, mismatches: 1 })
  })

  it('writes its own key family below the prefix, with hourly buckets that expire by Redis', async () => {
    const prefix = `sh${++prefixes}:`
    const results = await replica(prefix)
    results.record(outcome('mismatch', Date.now(), { pointers: ['/x'] }))
    await results.flush()
    const keys = await redis.client().keys(`${prefix}*`)
    expect(keys.every((key) => key.startsWith(`${prefix}sh:`))).toBe(true)
    const hourKey = keys.find((key) => key.includes(':h:')) as string
    expect(await redis.client().ttl(hourKey)).toBeGreaterThan(24 * 3600)
    // Statuses and pointers only: no body value, no credential.
    const stored = JSON.stringify(await Promise.all(keys.map(async (key) => ((await redis.client().type(key)) === 'list' ? redis.client().lrange(key, 0, -1) : (await redis.client().type(key)) === 'hash' ? redis.client().hgetall(key) : redis.client().get(key)))))
    expect(stored).toContain('/x')
  })

  it('keeps the 100-pointer bound across replicas flushing into one route', async () => {
    const prefix = `sh${++prefixes}:`
    const [a, b] = [await replica(prefix), await replica(prefix)]
    for (let index = 0; index < 80; index++) a.record(outcome('mismatch', T0, { pointers: [`/a${index}`] }))
    for (let index = 0; index < 80; index++) b.record(outcome('mismatch', T0, { pointers: [`/b${index}`] }))
    await a.flush()
    await b.flush()
    const pointers = await redis.client().hgetall(`${prefix}sh:acme:${encodeURIComponent(ROUTE)}:p`)
    expect(Object.keys(pointers).filter((pointer) => pointer !== '#other')).toHaveLength(100)
    expect(Number(pointers['#other'])).toBe(60)
  })

  it('resets a route for the whole fleet', async () => {
    const prefix = `sh${++prefixes}:`
    const [a, b] = [await replica(prefix), await replica(prefix)]
    a.record(outcome('match'))
    await a.flush()
    expect(await b.reset('acme', [ROUTE], T0 + 100)).toBe('fleet')
    expect((await a.answer(ROUTES, T0 + 200)).tenants.acme?.[ROUTE]).toMatchObject({ since: new Date(T0 + 100).toISOString(), comparisons: 0 })
  })

  // A flush that took its counts and then wrote them wrote counts made before a reset that landed
  // between the two. The reset is put right before the flush's first call to Redis, once it has
  // its counts in hand: the write must see it (WRITE_TALLY checks the reset and writes in one
  // script). (Only here is the store's call wrapped: no socket can place a reset there.)
  it('leaves no count made before a reset that lands while a flush is under way', async () => {
    const prefix = `sh${++prefixes}:`
    const store = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: prefix, logger: QUIET }), (shared) => shared.close())
    const a = await ownedByTest('shadowResults', async () => new ShadowResults({ store, logger: QUIET, flushMs: 60_000 }), (results) => results.stop())
    const b = await replica(prefix)
    const connection = store.connection as NonNullable<typeof store.connection>
    const run = connection.run.bind(connection)
    let calls = 0
    let resetScope: string | undefined
    connection.run = (async (work: Parameters<typeof run>[0]) => {
      if (++calls === 1) resetScope = await b.reset('acme', [ROUTE], Date.now())
      return run(work)
    }) as typeof connection.run
    a.record(outcome('mismatch', Date.now() - 1_000, { pointers: ['/before'] }))
    await a.flush()
    expect(calls).toBeGreaterThan(0)
    expect(resetScope).toBe('fleet')
    const route = (await b.answer(ROUTES, Date.now())).tenants.acme?.[ROUTE]
    expect(route).toMatchObject({ comparisons: 0, mismatches: 0, topPointers: [], samples: [] })
  })

  it('writes none of what it counted long before a reset on another replica, however long it went unwritten', async () => {
    const prefix = `sh${++prefixes}:`
    const [a, b] = [await replica(prefix), await replica(prefix)]
    const now = Date.now()
    // Twenty minutes of mismatches b could not write (its store away, its flushes failing) ...
    for (let index = 0; index < 20; index++) b.record(outcome('mismatch', now - 20 * 60_000 + index * 50_000, { pointers: ['/before'] }))
    // ... a reset on a, then one comparison on b after it, then b's flush.
    expect(await a.reset('acme', [ROUTE], now - 30_000)).toBe('fleet')
    b.record(outcome('match', now))
    await b.flush()
    const route = (await a.answer(ROUTES, now)).tenants.acme?.[ROUTE]
    expect(route).toMatchObject({ comparisons: 1, matches: 1, mismatches: 0, topPointers: [], samples: [] })
  })

  it('answers since a reset made while the store was away (local), and leaves the fleet\'s counts as they are: only a reset the store takes starts them again', async () => {
    const prefix = `sh${++prefixes}:`
    const [a, b] = [await replica(prefix), await replica(prefix)]
    for (let index = 0; index < 5; index++) a.record(outcome('mismatch', Date.now() - 10_000, { pointers: ['/before'] }))
    b.record(outcome('match', Date.now()))
    await Promise.all([a.flush(), b.flush()])
    const fleetSince = (await b.answer(ROUTES, Date.now())).tenants.acme?.[ROUTE]?.since
    redis.pause()
    try {
      await until(async () => a.scope() === 'local', 10_000)
      const resetAtMs = Date.now()
      expect(await a.reset('acme', [ROUTE], resetAtMs)).toBe('local')
      a.record(outcome('match', resetAtMs + 1))
      // This replica answers from its reset on, not from the outage's start.
      expect((await a.answer(ROUTES, resetAtMs + 2)).tenants.acme?.[ROUTE]).toMatchObject({ since: new Date(resetAtMs).toISOString(), comparisons: 1 })
    } finally {
      redis.resume()
    }
    await until(async () => a.scope() === 'fleet' && b.scope() === 'fleet', 10_000)
    await a.flush()
    // The fleet's counts go on: nothing lost, this replica's comparison after its reset added.
    expect((await b.answer(ROUTES, Date.now())).tenants.acme?.[ROUTE]).toMatchObject({ since: fleetSince, comparisons: 7, matches: 2, mismatches: 5 })
  })

  it('writes a pointer with a lone surrogate (a V4 answer may name a member so) like any other', async () => {
    const prefix = `sh${++prefixes}:`
    const results = await replica(prefix)
    results.record(outcome('mismatch', Date.now(), { requestId: 'odd', pointers: ['/\ud800x', '/plain'] }))
    await results.flush()
    const route = (await results.answer(ROUTES, Date.now())).tenants.acme?.[ROUTE]
    expect(route).toMatchObject({ comparisons: 1, mismatches: 1 })
    expect(route?.topPointers.map((pointer) => pointer.pointer).sort()).toEqual(['/plain', '/\ufffdx'])
    expect(route?.samples.map((sample) => sample.requestId)).toEqual(['odd'])
  })

  it('counts a route again at the next flush when Redis refused its write, and writes it then', async () => {
    const prefix = `sh${++prefixes}:`
    const results = await replica(prefix)
    const countsKey = `${prefix}sh:acme:${encodeURIComponent(ROUTE)}:c`
    // A key of the wrong type: the route's script fails (WRONGTYPE), the pipeline throws nothing.
    await redis.client().set(countsKey, 'not a hash')
    results.record(outcome('mismatch', Date.now(), { pointers: ['/kept'] }))
    await results.flush()
    expect(await redis.client().type(countsKey)).toBe('string')
    await redis.client().del(countsKey)
    await results.flush()
    const route = (await results.answer(ROUTES, Date.now())).tenants.acme?.[ROUTE]
    expect(route).toMatchObject({ comparisons: 1, mismatches: 1, topPointers: [{ pointer: '/kept', count: 1 }] })
  })

  it("answers with this replica's counts, scope local, while the store is away, and adds them to the fleet's when it answers", async () => {
    const prefix = `sh${++prefixes}:`
    const results = await replica(prefix)
    results.record(outcome('match'))
    await results.flush()
    redis.pause()
    try {
      results.record(outcome('mismatch', T0, { pointers: ['/y'] }))
      await until(async () => (await results.answer(ROUTES, T0)).scope === 'local', 10_000)
      const local = (await results.answer(ROUTES, T0)).tenants.acme?.[ROUTE]
      expect(local).toMatchObject({ comparisons: 1, mismatches: 1, matches: 0 })
    } finally {
      redis.resume()
    }
    await until(async () => results.scope() === 'fleet', 10_000)
    await results.flush()
    expect((await results.answer(ROUTES, T0)).tenants.acme?.[ROUTE]).toMatchObject({ comparisons: 2, matches: 1, mismatches: 1 })
  })
})
