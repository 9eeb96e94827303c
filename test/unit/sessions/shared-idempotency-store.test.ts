import { describe, expect, it } from 'vitest'
import type { ClaimResult, IdempotencyStore, StoredAnswer } from '../../../src/sessions/idempotency-store.js'
import { createSharedIdempotencyStore, decodeRecord, encodeRecord } from '../../../src/sessions/shared-idempotency-store.js'
import { createSharedStore, type SharedStore } from '../../../src/store/shared-store.js'
import { startRedisProxy } from '../../helpers/redis-proxy.js'
import { until, useRedisServer } from '../../helpers/redis-server.js'
import { ownedByTest } from '../../helpers/teardown.js'

const BOUNDS = { group: 'acme\u0000POST /v1/headless/runs', maxEntries: 100, maxBytes: 1_000_000 }
const FP = 'f'.repeat(64)
const QUIET = { info: () => undefined, warn: () => undefined }
const redis = useRedisServer()
let prefixes = 0

function answer(text: string): StoredAnswer {
  return { statusCode: 201, body: Buffer.from(text), contentType: 'application/json', sessionId: 'ses_1' }
}

function ownerOf(result: ClaimResult): string {
  if (!result.claimed) throw new Error(`expected a claim, got ${JSON.stringify(result)}`)
  return result.owner
}

/** One replica's view: its own connection to the one redis-server, as each gateway process has. */
async function replica(prefix: string, url = redis.url): Promise<{ shared: SharedStore; records: IdempotencyStore }> {
  const shared = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url, keyPrefix: prefix, logger: QUIET }), (store) => store.close())
  return { shared, records: createSharedIdempotencyStore(shared, { pollMs: 5 }) }
}

describe('SPEC 16 idempotency records on the shared store (real redis-server)', () => {
  it('lets one of two replicas claim a key; the other sees the claim, then the answer that replaced it', async () => {
    const prefix = `t${++prefixes}:`
    const [a, b] = [await replica(prefix), await replica(prefix)]
    const owner = ownerOf(await a.records.claim('k', FP, 5_000, BOUNDS))
    expect(await b.records.claim('k', FP, 5_000, BOUNDS)).toEqual({ claimed: false, record: { state: 'running', fingerprint: FP } })
    expect(await a.records.complete('k', owner, answer('{"output":1}'), 60_000, BOUNDS)).toBe(true)
    expect(await b.records.claim('k', FP, 5_000, BOUNDS)).toEqual({ claimed: false, record: { state: 'done', fingerprint: FP, answer: answer('{"output":1}') } })
  })

  it('writes one key in its own family below the prefix, holding only hashes and the answer, with the claim\'s PX then the answer\'s', async () => {
    const prefix = `t${++prefixes}:`
    const { records } = await replica(prefix)
    const owner = ownerOf(await records.claim('k', FP, 5_000, BOUNDS))
    const keys = await redis.client().keys(`${prefix}*`)
    expect(keys).toEqual([`${prefix}i:k`])
    const claimTtl = await redis.client().pttl(`${prefix}i:k`)
    expect(claimTtl).toBeGreaterThan(0)
    expect(claimTtl).toBeLessThanOrEqual(5_000)
    await records.complete('k', owner, answer('{"output":1}'), 60_000, BOUNDS)
    expect(await redis.client().pttl(`${prefix}i:k`)).toBeGreaterThan(5_000)
    expect(await redis.client().keys(`${prefix}*`)).toEqual([`${prefix}i:k`])
  })

  it('does not complete or renew a claim that lapsed and was taken by another replica', async () => {
    const prefix = `t${++prefixes}:`
    const [a, b] = [await replica(prefix), await replica(prefix)]
    const first = ownerOf(await a.records.claim('k', FP, 50, BOUNDS))
    // The lease lapses by Redis's own expiry (as when its replica died).
    await until(async () => (await redis.client().exists(`${prefix}i:k`)) === 0)
    const second = ownerOf(await b.records.claim('k', FP, 5_000, BOUNDS))
    expect(await a.records.renew('k', first, 5_000)).toBe(false)
    expect(await a.records.complete('k', first, answer('late'), 60_000, BOUNDS)).toBe(false)
    expect(await b.records.renew('k', second, 5_000)).toBe(true)
    expect(await a.records.claim('k', FP, 5_000, BOUNDS)).toMatchObject({ claimed: false, record: { state: 'running' } })
  })

  it('renews a claim with PEXPIRE only while it holds it', async () => {
    const prefix = `t${++prefixes}:`
    const { records } = await replica(prefix)
    const owner = ownerOf(await records.claim('k', FP, 1_000, BOUNDS))
    expect(await records.renew('k', owner, 60_000)).toBe(true)
    expect(await redis.client().pttl(`${prefix}i:k`)).toBeGreaterThan(1_000)
  })

  it('deletes a released claim so that the next claim runs, and leaves another owner\'s claim alone', async () => {
    const prefix = `t${++prefixes}:`
    const [a, b] = [await replica(prefix), await replica(prefix)]
    const owner = ownerOf(await a.records.claim('k', FP, 5_000, BOUNDS))
    await b.records.release('k', `c:${'0'.repeat(32)}:${FP}`)
    expect(await redis.client().exists(`${prefix}i:k`)).toBe(1)
    await a.records.release('k', owner)
    expect(await b.records.claim('k', FP, 5_000, BOUNDS)).toMatchObject({ claimed: true })
  })

  it('keeps a record without its body for an answer too large to keep', async () => {
    const prefix = `t${++prefixes}:`
    const { records } = await replica(prefix)
    const owner = ownerOf(await records.claim('k', FP, 5_000, BOUNDS))
    await records.complete('k', owner, null, 60_000, BOUNDS)
    expect(await records.claim('k', FP, 5_000, BOUNDS)).toEqual({ claimed: false, record: { state: 'done', fingerprint: FP, answer: null } })
  })

  it('looks a record up without claiming it', async () => {
    const prefix = `t${++prefixes}:`
    const { records } = await replica(prefix)
    expect(await records.peek('k')).toBeUndefined()
    expect(await redis.client().exists(`${prefix}i:k`)).toBe(0)
    const owner = ownerOf(await records.claim('k', FP, 5_000, BOUNDS))
    expect(await records.peek('k')).toEqual({ state: 'running', fingerprint: FP })
    await records.complete('k', owner, answer('x'), 60_000, BOUNDS)
    expect(await records.peek('k')).toEqual({ state: 'done', fingerprint: FP, answer: answer('x') })
  })

  it('deletes a claim the store applied but whose answer the connection lost, once the store is back', async () => {
    const link = await startRedisProxy(redis.url)
    const prefix = `t${++prefixes}:`
    const { shared, records } = await replica(prefix, link.url)
    await until(() => shared.connection?.isUp() === true)
    // The claim script reaches Redis and runs; its reply never comes back, and the connection goes.
    link.loseReplyTo(/eval/i)
    const claim = await records.claim('lost', FP, 60_000, BOUNDS)
    // This replica went on from its own memory, as SPEC 16 says for a store that does not answer.
    expect(claim).toMatchObject({ claimed: true, unavailable: true })
    // The claim was applied, with a lease of a minute that nobody renews; gone once the store is back.
    await until(async () => shared.connection?.isUp() === true, 10_000)
    await until(async () => (await redis.client().exists(`${prefix}i:lost`)) === 0, 5_000)
  })

  it('deletes a claim whose release the store could not take, once the store is back, so that the retry runs', async () => {
    const link = await startRedisProxy(redis.url)
    const prefix = `t${++prefixes}:`
    const { shared, records } = await replica(prefix, link.url)
    await until(() => shared.connection?.isUp() === true)
    const owner = ownerOf(await records.claim('released', FP, 60_000, BOUNDS))
    link.cut()
    await until(() => shared.connection?.isUp() === false)
    // Not kept (SPEC 16): released while the store is away, the command is never sent.
    await records.release('released', owner)
    expect(await redis.client().exists(`${prefix}i:released`)).toBe(1)
    link.restore()
    await until(async () => (await redis.client().exists(`${prefix}i:released`)) === 0, 10_000)
    expect(await records.claim('released', FP, 60_000, BOUNDS)).toMatchObject({ claimed: true })
  })

  it('has a duplicate wait for the request this replica runs when the store goes away meanwhile, then replay its answer', async () => {
    const link = await startRedisProxy(redis.url)
    const { shared, records } = await replica(`t${++prefixes}:`, link.url)
    await until(() => shared.connection?.isUp() === true)
    const owner = ownerOf(await records.claim('running', FP, 60_000, BOUNDS))
    link.cut()
    await until(() => shared.connection?.isUp() === false)
    // Its memory knows nothing of the claim in Redis: it would have run the execution a second time.
    expect(await records.claim('running', FP, 60_000, BOUNDS)).toEqual({ claimed: false, record: { state: 'running', fingerprint: FP }, unavailable: true })
    expect(await records.complete('running', owner, answer('first'), 60_000, BOUNDS)).toBe('local')
    expect(await records.claim('running', FP, 60_000, BOUNDS)).toMatchObject({ claimed: false, record: { state: 'done', answer: { body: Buffer.from('first') } }, unavailable: true })
  })

  it('has a duplicate whose claim command fails on a hung store wait for the request this replica runs, as when the store is found down', async () => {
    const link = await startRedisProxy(redis.url)
    const { shared, records } = await replica(`t${++prefixes}:`, link.url)
    await until(() => shared.connection?.isUp() === true)
    ownerOf(await records.claim('hung', FP, 60_000, BOUNDS))
    link.hang()
    // Sent while the store still counts as up: the command times out, and the claim goes on without it.
    expect(shared.connection?.isUp()).toBe(true)
    expect(await records.claim('hung', FP, 60_000, BOUNDS)).toEqual({ claimed: false, record: { state: 'running', fingerprint: FP }, unavailable: true })
  })

  it('round-trips any body bytes and headers through the record encoding', () => {
    const body = Buffer.from([0, 10, 13, 0xff, 0x3a, 10, 10])
    const stored = { statusCode: 502, body, contentType: 'text/plain; x="a\nb"', sessionId: undefined }
    expect(decodeRecord(encodeRecord(FP, stored))).toEqual({ state: 'done', fingerprint: FP, answer: stored })
    // An answer the gateway made says so after the round trip (its replay is x-v4gw-served-by: gateway).
    const made = { statusCode: 504, body: Buffer.from('{}'), contentType: 'application/json', sessionId: 's-1', madeByGateway: true }
    expect(decodeRecord(encodeRecord(FP, made))).toEqual({ state: 'done', fingerprint: FP, answer: made })
    expect(decodeRecord(Buffer.from('not ours'))).toBeUndefined()
  })
})
