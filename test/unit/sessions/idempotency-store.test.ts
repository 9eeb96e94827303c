import { describe, expect, it } from 'vitest'
import { createMemoryIdempotencyStore, type StoredAnswer } from '../../../src/sessions/idempotency-store.js'

const BOUNDS = { group: 'acme\u0000POST /v1/headless/runs', maxEntries: 100, maxBytes: 1_000_000 }

function answer(bytes: number): StoredAnswer {
  return { statusCode: 200, body: Buffer.alloc(bytes, 0x61), contentType: 'application/json', sessionId: undefined }
}

function claimed(result: ReturnType<ReturnType<typeof createMemoryIdempotencyStore>['claim']>): string {
  if (!('claimed' in result) || !result.claimed) throw new Error('expected a claim')
  return result.owner
}

describe('SPEC 16 memory idempotency records', () => {
  it('answers a second claim with the running record, then with the stored answer once completed', () => {
    const store = createMemoryIdempotencyStore()
    const owner = claimed(store.claim('k', 'fp', 1_000, BOUNDS))
    expect(store.claim('k', 'fp', 1_000, BOUNDS)).toEqual({ claimed: false, record: { state: 'running', fingerprint: 'fp' } })
    expect(store.complete('k', owner, answer(3), 60_000, BOUNDS)).toBe(true)
    expect(store.claim('k', 'other', 1_000, BOUNDS)).toEqual({ claimed: false, record: { state: 'done', fingerprint: 'fp', answer: answer(3) } })
  })

  it('lets a claim go on release, so that the next claim runs', () => {
    const store = createMemoryIdempotencyStore()
    const owner = claimed(store.claim('k', 'fp', 1_000, BOUNDS))
    store.release('k', owner)
    expect(store.claim('k', 'fp', 1_000, BOUNDS)).toMatchObject({ claimed: true })
  })

  it('does not complete a claim its owner no longer holds (it expired and another took it)', () => {
    let now = 0
    const store = createMemoryIdempotencyStore(() => now)
    const first = claimed(store.claim('k', 'fp', 1_000, BOUNDS))
    now = 1_000
    const second = claimed(store.claim('k', 'fp', 1_000, BOUNDS))
    expect(store.complete('k', first, answer(1), 60_000, BOUNDS)).toBe(false)
    expect(store.renew('k', first, 1_000)).toBe(false)
    expect(store.renew('k', second, 1_000)).toBe(true)
  })

  it('forgets a stored answer after its ttl', () => {
    let now = 0
    const store = createMemoryIdempotencyStore(() => now)
    store.complete('k', claimed(store.claim('k', 'fp', 1_000, BOUNDS)), answer(1), 5_000, BOUNDS)
    now = 5_000
    expect(store.claim('k', 'fp', 1_000, BOUNDS)).toMatchObject({ claimed: true })
  })

  it('pushes out the oldest finished records past maxEntries, never a claim under way', () => {
    const store = createMemoryIdempotencyStore()
    const bounds = { ...BOUNDS, maxEntries: 2 }
    claimed(store.claim('running', 'fp', 60_000, bounds))
    store.complete('a', claimed(store.claim('a', 'fp', 1_000, bounds)), answer(1), 60_000, bounds)
    store.complete('b', claimed(store.claim('b', 'fp', 1_000, bounds)), answer(1), 60_000, bounds)
    expect(store.size).toBe(2)
    expect(store.claim('running', 'fp', 1_000, bounds)).toMatchObject({ claimed: false, record: { state: 'running' } })
    expect(store.claim('a', 'fp', 1_000, bounds)).toMatchObject({ claimed: true })
  })

  it('pushes out the oldest finished records past maxBytes', () => {
    const store = createMemoryIdempotencyStore()
    const bounds = { ...BOUNDS, maxBytes: 3_000 }
    store.complete('a', claimed(store.claim('a', 'fp', 1_000, bounds)), answer(1_500), 60_000, bounds)
    store.complete('b', claimed(store.claim('b', 'fp', 1_000, bounds)), answer(1_500), 60_000, bounds)
    expect(store.claim('a', 'fp', 1_000, bounds)).toMatchObject({ claimed: true })
    expect(store.claim('b', 'fp', 1_000, bounds)).toMatchObject({ claimed: false, record: { state: 'done' } })
  })

  it('bounds each route\'s records by its own settings: a route with small bounds pushes out none of another\'s', () => {
    const store = createMemoryIdempotencyStore()
    const roomy = { group: 'other\u0000POST /v1/runs/invoke', maxEntries: 100, maxBytes: 1_000_000 }
    const tight = { group: 'acme\u0000POST /v1/headless/runs', maxEntries: 1, maxBytes: 1_000 }
    for (const key of ['r1', 'r2', 'r3']) store.complete(key, claimed(store.claim(key, 'fp', 1_000, roomy)), answer(1), 60_000, roomy)
    store.complete('t1', claimed(store.claim('t1', 'fp', 1_000, tight)), answer(1), 60_000, tight)
    store.complete('t2', claimed(store.claim('t2', 'fp', 1_000, tight)), answer(700), 60_000, tight)
    // The tight route kept its newest only; the roomy one all three.
    expect(store.size).toBe(4)
    for (const key of ['r1', 'r2', 'r3', 't2']) expect(store.peek(key)).toMatchObject({ state: 'done' })
    expect(store.peek('t1')).toBeUndefined()
    // Bytes are counted per route too: t3 takes the tight route past its 1,000 bytes, and its own t2 goes.
    store.complete('t3', claimed(store.claim('t3', 'fp', 1_000, tight)), answer(10), 60_000, tight)
    expect(store.peek('t2')).toBeUndefined()
    for (const key of ['r1', 'r2', 'r3', 't3']) expect(store.peek(key)).toMatchObject({ state: 'done' })
  })

  it('bounds the replica\'s records by the largest bounds of its routes (SPEC 16: per replica), the oldest going first whatever their route', () => {
    const store = createMemoryIdempotencyStore()
    const headless = { group: 'acme\u0000POST /v1/headless/runs', maxEntries: 3, maxBytes: 10_000 }
    const invoke = { group: 'other\u0000POST /v1/runs/invoke', maxEntries: 3, maxBytes: 10_000 }
    for (const key of ['h1', 'h2', 'h3']) store.complete(key, claimed(store.claim(key, 'fp', 1_000, headless)), answer(1), 60_000, headless)
    for (const key of ['i1', 'i2']) store.complete(key, claimed(store.claim(key, 'fp', 1_000, invoke)), answer(1), 60_000, invoke)
    // Three records per replica, not three per route: h1 and h2, the oldest, went.
    expect(store.size).toBe(3)
    for (const key of ['h3', 'i1', 'i2']) expect(store.peek(key)).toMatchObject({ state: 'done' })
    // Bytes likewise: i3's 4,000 and h4's 7,000 pass no route's 10,000 alone, together they do: the older goes.
    store.complete('i3', claimed(store.claim('i3', 'fp', 1_000, invoke)), answer(4_000), 60_000, invoke)
    store.complete('h4', claimed(store.claim('h4', 'fp', 1_000, headless)), answer(7_000), 60_000, headless)
    expect(store.peek('h4')).toMatchObject({ state: 'done' })
    expect(store.peek('i3')).toBeUndefined()
    // A claim under way is never pushed out, though it is the oldest.
    claimed(store.claim('run', 'fp', 1_000, invoke))
    for (const key of ['h5', 'h6', 'h7']) store.complete(key, claimed(store.claim(key, 'fp', 1_000, headless)), answer(1), 60_000, headless)
    expect(store.peek('run')).toEqual({ state: 'running', fingerprint: 'fp' })
    expect(store.size).toBe(3)
  })

  it('reads the replica\'s bound again once a route\'s last record went: the largest bounds left apply', () => {
    const store = createMemoryIdempotencyStore()
    const roomy = { group: 'acme\u0000POST /v1/headless/runs', maxEntries: 4, maxBytes: 100_000 }
    const small = { group: 'other\u0000POST /v1/runs/invoke', maxEntries: 2, maxBytes: 100_000 }
    const smallToo = { group: 'third\u0000POST /v1/runs/invoke', maxEntries: 2, maxBytes: 100_000 }
    store.complete('r1', claimed(store.claim('r1', 'fp', 1_000, roomy)), answer(1), 60_000, roomy)
    for (const key of ['s1', 's2']) store.complete(key, claimed(store.claim(key, 'fp', 1_000, small)), answer(1), 60_000, small)
    store.complete('t1', claimed(store.claim('t1', 'fp', 1_000, smallToo)), answer(1), 60_000, smallToo)
    // A fifth record (a claim) over the roomy route's 4: its one record, the oldest, goes; the
    // bound is then 2, within the same write: the two oldest left go too, not the claim.
    claimed(store.claim('t2', 'fp', 1_000, smallToo))
    expect(store.peek('r1')).toBeUndefined()
    expect(store.size).toBe(2)
    expect(store.peek('t1')).toMatchObject({ state: 'done' })
    expect(store.peek('t2')).toEqual({ state: 'running', fingerprint: 'fp' })
  })

  // SPEC 17: idempotency records stay until their TTL whatever the new config says.
  it('pushes out none of the records written before a reload lowered the route\'s bounds: the new bounds count the records after it', () => {
    let now = 0
    const store = createMemoryIdempotencyStore(() => now)
    const before = { ...BOUNDS, maxEntries: 10 }
    const after = { ...BOUNDS, maxEntries: 2 }
    for (const key of ['o1', 'o2', 'o3', 'o4']) store.complete(key, claimed(store.claim(key, 'fp', 1_000, before)), answer(1), 60_000, before)
    for (const key of ['n1', 'n2', 'n3']) store.complete(key, claimed(store.claim(key, 'fp', 1_000, after)), answer(1), 60_000, after)
    for (const key of ['o1', 'o2', 'o3', 'o4', 'n2', 'n3']) expect(store.peek(key)).toMatchObject({ state: 'done' })
    expect(store.peek('n1')).toBeUndefined()
    // They go at their TTL.
    now = 60_000
    store.sweep(100)
    expect(store.size).toBe(0)
  })

  it('wakes a waiter when the record is completed, before its wait is over', async () => {
    const store = createMemoryIdempotencyStore()
    const owner = claimed(store.claim('k', 'fp', 1_000, BOUNDS))
    const waiting = store.changed('k', 60_000)
    let woken = false
    void waiting.then(() => (woken = true))
    store.complete('k', owner, answer(1), 60_000, BOUNDS)
    // Woken within the turn it was completed in, not at the end of its 60 s wait.
    await new Promise((resolve) => setImmediate(resolve))
    expect(woken).toBe(true)
  })

  it('drops ended records from the oldest on when swept, and stops at the first live one', () => {
    let now = 0
    const store = createMemoryIdempotencyStore(() => now)
    const first = claimed(store.claim('a', 'fp', 1_000, BOUNDS))
    store.complete('a', first, answer(1), 100, BOUNDS)
    claimed(store.claim('b', 'fp', 1_000, BOUNDS))
    now = 500
    store.sweep(10)
    expect(store.size).toBe(1)
    expect(store.peek('b')).toEqual({ state: 'running', fingerprint: 'fp' })
    now = 2_000
    store.sweep(10)
    expect(store.size).toBe(0)
  })
})

describe('ended records of a route no request reads again', () => {
  it('are dropped past their TTL by the claims of other routes (a reload removed theirs)', () => {
    let time = 1_000
    const store = createMemoryIdempotencyStore(() => time)
    const removed = { ...BOUNDS, group: 'acme\u0000POST /v1/removed' }
    for (let index = 0; index < 3; index++) {
      const owner = claimed(store.claim(`old-${index}`, 'f', 1_000, removed))
      store.complete(`old-${index}`, owner, answer(10), 5_000, removed)
    }
    expect(store.size).toBe(3)
    time += 6_000
    store.claim('new-1', 'f', 1_000, BOUNDS)
    // The three ended records went; the claim under way stays.
    expect(store.size).toBe(1)
  })

  it('are dropped though another route\'s older record lives on (routes\' TTLs differ)', () => {
    let time = 1_000
    const store = createMemoryIdempotencyStore(() => time)
    const longLived = { ...BOUNDS, group: 'acme\u0000POST /v1/long' }
    const shortLived = { ...BOUNDS, group: 'acme\u0000POST /v1/short' }
    const first = claimed(store.claim('long-1', 'f', 1_000, longLived))
    store.complete('long-1', first, answer(10), 7 * 24 * 3_600_000, longLived)
    for (let index = 0; index < 3; index++) {
      const owner = claimed(store.claim(`short-${index}`, 'f', 1_000, shortLived))
      store.complete(`short-${index}`, owner, answer(10), 60_000, shortLived)
    }
    time += 120_000
    store.claim('other', 'f', 1_000, BOUNDS)
    // The long-lived record and the new claim stay; the three ended ones went.
    expect(store.size).toBe(2)
  })
})
