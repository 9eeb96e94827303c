import { setTimeout as sleep } from 'node:timers/promises'
import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { configSchema } from '../../../src/config/schema.js'
import { createSessionStore } from '../../../src/sessions/create-session-store.js'
import { startAcrossReplicas, type StartResult } from '../../../src/sessions/distributed-start.js'
import { createSharedStore } from '../../../src/store/shared-store.js'
import { buildRedisKeys, escapeGlob } from '../../../src/sessions/redis-keys.js'
import { sessionKeyPrefix } from '../../../src/sessions/session-key.js'
import { createRedisSessionStore, type RedisSessionStore, type RedisSessionStoreOptions } from '../../../src/sessions/redis-session-store.js'
import { createLogSink } from '../../helpers/log-sink.js'
import { startRedisProxy } from '../../helpers/redis-proxy.js'
import { until, useRedisServer } from '../../helpers/redis-server.js'
import { ownedByTest } from '../../helpers/teardown.js'

const redis = useRedisServer()
let prefixCount = 0

/**
 * A store on the test server with a key prefix of its own, so tests never see each other's keys;
 * closed when the test finishes.
 */
function openStore(overrides: Partial<RedisSessionStoreOptions> = {}): Promise<RedisSessionStore> {
  const options: RedisSessionStoreOptions = {
    url: redis.url,
    keyPrefix: `t${++prefixCount}:`,
    maxEntries: 1_000,
    ttlMs: 60_000,
    lockMs: 1_000,
    logger: pino({ level: 'silent' }),
    ...overrides
  }
  return ownedByTest('openStore', () => createRedisSessionStore(options), (store) => store.close())
}

/** Two replicas' stores on one prefix. */
async function twoReplicas(overrides: Partial<RedisSessionStoreOptions> = {}): Promise<[RedisSessionStore, RedisSessionStore, string]> {
  const keyPrefix = `t${++prefixCount}:`
  return [await openStore({ keyPrefix, ...overrides }), await openStore({ keyPrefix, ...overrides }), keyPrefix]
}

/**
 * Replica B has read the entry A stored, and B's local copy (50 ms) has run out: B's next look
 * reads Redis, the moment the races of a read in flight need.
 */
async function replicaWithExpiredCopy(): Promise<{ replicaB: RedisSessionStore; prefix: string }> {
  const [replicaA, replicaB, prefix] = await twoReplicas({ localTtlMs: 50 })
  await replicaA.set('k', { sessionId: 'ses_1', tenant: 'acme' })
  await replicaB.get('k', 'acme')
  await sleep(60)
  return { replicaB, prefix }
}

describe('buildRedisKeys', () => {
  it('names session entries <prefix>s:<tenant>:<key> and locks <prefix>l:<tenant>:<key>', () => {
    const keys = buildRedisKeys('v4gw:')
    expect(keys.session('acme', 'abc')).toBe('v4gw:s:acme:abc')
    expect(keys.lock('acme', 'abc')).toBe('v4gw:l:acme:abc')
    expect(keys.tenantOf('v4gw:s:acme:abc')).toBe('acme')
    expect(keys.tenantOf('v4gw:l:acme:abc')).toBeUndefined()
  })

  it('escapes glob characters of the prefix in SCAN patterns', () => {
    expect(escapeGlob('a*b?[c]\\')).toBe('a\\*b\\?\\[c\\]\\\\')
    expect(buildRedisKeys('p*:').sessionPattern('acme')).toBe('p\\*:s:acme:*')
    expect(buildRedisKeys('v4gw:').sessionPattern('acme', 'Ab-_9?x.')).toBe('v4gw:s:acme:Ab-_9\\?x.*')
  })
})

describe('createRedisSessionStore', () => {
  it('stores the session id alone under <prefix>s:<tenant>:<key> with a PX of sessions.ttlMs', async () => {
    const store = await openStore({ ttlMs: 30_000 })
    await store.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    const prefix = `t${prefixCount}:`
    expect(await redis.client().get(`${prefix}s:acme:k1`)).toBe('ses_1')
    const pttl = await redis.client().pttl(`${prefix}s:acme:k1`)
    expect(pttl).toBeGreaterThan(29_000)
    expect(pttl).toBeLessThanOrEqual(30_000)
  })

  it('answers a local hit without asking Redis', async () => {
    const [replicaA, replicaB, prefix] = await twoReplicas()
    await replicaA.set('k', { sessionId: 'ses_1', tenant: 'acme' })
    await redis.client().del(`${prefix}s:acme:k`)
    expect(await replicaA.get('k', 'acme')).toEqual({ sessionId: 'ses_1', tenant: 'acme' })
    expect(await replicaB.get('k', 'acme')).toBeUndefined()
  })

  it('reads an entry another replica stored, and keeps a local copy of it', async () => {
    const [replicaA, replicaB] = await twoReplicas()
    await replicaA.set('k', { sessionId: 'ses_1', tenant: 'acme' })
    expect(replicaB.size).toBe(0)
    expect(await replicaB.get('k', 'acme')).toEqual({ sessionId: 'ses_1', tenant: 'acme' })
    expect(replicaB.size).toBe(1)
  })

  it('reads a key once for all the requests that miss it locally at the same moment', async () => {
    const [replicaA, replicaB] = await twoReplicas()
    await replicaA.set('k', { sessionId: 'ses_1', tenant: 'acme' })
    const reads = async (): Promise<number> => Number(/cmdstat_pttl:calls=(\d+)/.exec(await redis.client().info('commandstats'))?.[1] ?? 0)
    const before = await reads()
    const answers = await Promise.all(Array.from({ length: 50 }, () => replicaB.get('k', 'acme')))
    expect(new Set(answers.map((answer) => answer?.sessionId))).toEqual(new Set(['ses_1']))
    expect((await reads()) - before).toBe(1)
  })

  it('does not keep a copy that a read in flight brings back after this replica deleted the entry', async () => {
    const { replicaB } = await replicaWithExpiredCopy()
    // Another request's read goes out first, and its answer (the entry) comes back after the local delete.
    const inFlight = replicaB.get('k', 'acme')
    await replicaB.deleteIfSession('k', 'ses_1', 'acme')
    expect(await inFlight).toEqual({ sessionId: 'ses_1', tenant: 'acme' })
    // The evicting request's next look (SPEC 4 step 5: replace the stale session) must not find it.
    expect(await replicaB.get('k', 'acme')).toBeUndefined()
  })

  it('does not hand a look that comes after an eviction the answer of a read from before it', async () => {
    const { replicaB } = await replicaWithExpiredCopy()
    const before = replicaB.get('k', 'acme')
    const evicting = replicaB.deleteIfSession('k', 'ses_1', 'acme')
    // Sent after the delete: it must read Redis again, not share the read that went out before.
    const after = replicaB.get('k', 'acme')
    await evicting
    expect(await before).toEqual({ sessionId: 'ses_1', tenant: 'acme' })
    expect(await after).toBeUndefined()
  })

  it('does not keep what a read in flight during an admin clear brings back', async () => {
    const { replicaB } = await replicaWithExpiredCopy()
    const before = replicaB.get('k', 'acme')
    await replicaB.clear('acme')
    expect(await before).toEqual({ sessionId: 'ses_1', tenant: 'acme' })
    expect(await replicaB.get('k', 'acme')).toBeUndefined()
  })

  it('trusts a local copy for localTtlMs only, so a delete on another replica is seen', async () => {
    const [replicaA, replicaB] = await twoReplicas({ localTtlMs: 1_000 })
    await replicaA.set('k', { sessionId: 'ses_1', tenant: 'acme' })
    await replicaB.get('k', 'acme')
    await replicaA.deleteIfSession('k', 'ses_1', 'acme')
    expect(await replicaB.get('k', 'acme')).toEqual({ sessionId: 'ses_1', tenant: 'acme' })
    await sleep(1_100)
    expect(await replicaB.get('k', 'acme')).toBeUndefined()
  })

  it('never keeps a local copy past the shared entry ttl', async () => {
    const [replicaA, replicaB] = await twoReplicas({ ttlMs: 200, localTtlMs: 5_000 })
    await replicaA.set('k', { sessionId: 'ses_1', tenant: 'acme' })
    await replicaB.get('k', 'acme')
    await sleep(260)
    expect(await replicaA.get('k', 'acme')).toBeUndefined()
    expect(await replicaB.get('k', 'acme')).toBeUndefined()
  })

  it('deleteIfSession removes the shared entry while it still names the session', async () => {
    const [replicaA, replicaB, prefix] = await twoReplicas()
    await replicaA.set('k', { sessionId: 'ses_1', tenant: 'acme' })
    await replicaB.get('k', 'acme')
    expect(await replicaB.deleteIfSession('k', 'ses_1', 'acme')).toBe(true)
    expect(await redis.client().exists(`${prefix}s:acme:k`)).toBe(0)
    // Replica A drops its local copy, but the entry was B's to report: the fleet counts it once.
    expect(await replicaA.deleteIfSession('k', 'ses_1', 'acme')).toBe(false)
    expect(await replicaA.get('k', 'acme')).toBeUndefined()
  })

  it('deleteIfSession reaches the shared entry of a key this replica no longer holds anything of', async () => {
    // maxEntries 1: the second key pushes every local trace of the first out.
    const store = await openStore({ maxEntries: 1 })
    await store.set('k', { sessionId: 'ses_1', tenant: 'acme' })
    await store.set('other', { sessionId: 'ses_2', tenant: 'acme' })
    const keyPrefix = `t${prefixCount}:`
    expect(await redis.client().get(`${keyPrefix}s:acme:k`)).toBe('ses_1')
    expect(await store.deleteIfSession('k', 'ses_1', 'acme')).toBe(true)
    expect(await redis.client().exists(`${keyPrefix}s:acme:k`)).toBe(0)
  })

  it('deleteIfSession keeps a shared entry that already names a newer session', async () => {
    const [replicaA, replicaB, prefix] = await twoReplicas()
    await replicaA.set('k', { sessionId: 'ses_1', tenant: 'acme' })
    await replicaB.get('k', 'acme')
    await replicaA.set('k', { sessionId: 'ses_2', tenant: 'acme' })
    // Replica B's local copy of ses_1 goes, but the shared entry names ses_2 and stays: no removal to report.
    expect(await replicaB.deleteIfSession('k', 'ses_1', 'acme')).toBe(false)
    expect(await redis.client().get(`${prefix}s:acme:k`)).toBe('ses_2')
    expect(await replicaB.get('k', 'acme')).toEqual({ sessionId: 'ses_2', tenant: 'acme' })
  })

  it("clear(tenant) removes that tenant's shared entries over several SCAN batches and no one else's", async () => {
    const store = await openStore()
    const prefix = `t${prefixCount}:`
    const pipeline = redis.client().pipeline()
    for (let index = 0; index < 1_200; index++) pipeline.set(`${prefix}s:acme:k${index}`, `ses_${index}`, 'PX', 60_000)
    pipeline.set(`${prefix}s:beta:k0`, 'ses_beta', 'PX', 60_000)
    pipeline.set(`${prefix}s:acme-two:k0`, 'ses_acme_two', 'PX', 60_000)
    pipeline.set(`other:s:acme:k0`, 'ses_other_prefix', 'PX', 60_000)
    await pipeline.exec()
    expect(await store.clear('acme')).toBe(1_200)
    expect(await redis.client().keys(`${prefix}*`)).toEqual(expect.arrayContaining([`${prefix}s:beta:k0`, `${prefix}s:acme-two:k0`]))
    expect((await redis.client().keys(`${prefix}s:acme:*`)).length).toBe(0)
    expect(await redis.client().get('other:s:acme:k0')).toBe('ses_other_prefix')
    expect(await store.clear()).toBe(2)
    expect(await redis.client().get('other:s:acme:k0')).toBe('ses_other_prefix')
  })

  it('clear(tenant, upstreamOrigin) unlinks only the sessions on that upstream, whichever replica stored them', async () => {
    const [replicaA, replicaB, prefix] = await twoReplicas()
    const [left, moved] = [sessionKeyPrefix('http://old.example:4010'), sessionKeyPrefix('http://new.example:4010')]
    // A replica not yet reloaded stored a session on the old upstream; one that reloaded first, on the new one.
    await replicaB.set(`${left}k`, { sessionId: 'ses_old', tenant: 'acme' })
    await replicaA.set(`${moved}k`, { sessionId: 'ses_new', tenant: 'acme' })
    await replicaB.get(`${moved}k`, 'acme')
    expect(await replicaB.clear('acme', 'http://old.example:4010')).toBe(1)
    expect(await redis.client().get(`${prefix}s:acme:${left}k`)).toBeNull()
    expect(await redis.client().get(`${prefix}s:acme:${moved}k`)).toBe('ses_new')
    // Its own copy of the new upstream's entry stays too: read with the shared entry gone.
    await redis.client().del(`${prefix}s:acme:${moved}k`)
    expect(await replicaB.get(`${moved}k`, 'acme')).toEqual({ sessionId: 'ses_new', tenant: 'acme' })
    expect(await replicaB.get(`${left}k`, 'acme')).toBeUndefined()
  })

  it('clear(tenant) drops the local copies of that tenant too', async () => {
    const store = await openStore()
    await store.set('a', { sessionId: 'ses_a', tenant: 'acme' })
    await store.set('b', { sessionId: 'ses_b', tenant: 'beta' })
    await store.clear('acme')
    expect(await store.get('a', 'acme')).toBeUndefined()
    expect(await store.get('b', 'beta')).toEqual({ sessionId: 'ses_b', tenant: 'beta' })
  })

  it('matches a key prefix holding glob characters literally', async () => {
    const globby = await openStore({ keyPrefix: 'g*[1]:' })
    const plain = await openStore({ keyPrefix: 'gX1:' })
    await globby.set('k', { sessionId: 'ses_glob', tenant: 'acme' })
    await plain.set('k', { sessionId: 'ses_plain', tenant: 'acme' })
    expect(await globby.clear('acme')).toBe(1)
    expect(await redis.client().get('gX1:s:acme:k')).toBe('ses_plain')
  })

  it('countByTenant counts the shared entries of every replica', async () => {
    const [replicaA, replicaB] = await twoReplicas()
    await replicaA.set('a1', { sessionId: 'ses_1', tenant: 'acme' })
    await replicaB.set('a2', { sessionId: 'ses_2', tenant: 'acme' })
    await replicaB.set('b1', { sessionId: 'ses_3', tenant: 'beta' })
    expect(await replicaA.countByTenant()).toEqual({ acme: 2, beta: 1 })
  })

  it('describes itself as redis, up', async () => {
    expect((await openStore()).describe()).toEqual({ kind: 'redis', redis: 'up' })
  })
})

describe('the start lock', () => {
  it('makes the look after taking it read Redis again, not share a read sent before the lock', async () => {
    // The winner looks once more after taking the lock (distributed-start.ts); a read from before
    // may predate another replica's entry, and sharing it would start the session a second time.
    const { replicaB, prefix } = await replicaWithExpiredCopy()
    const pttlCalls = async (): Promise<number> => Number(/cmdstat_pttl:calls=(\d+)/.exec(await redis.client().info('commandstats'))?.[1] ?? 0)
    const calls = await pttlCalls()
    const before = replicaB.get('k', 'acme')
    const attempt = replicaB.startLock.acquire('k', 'acme')
    const look = replicaB.get('k', 'acme')
    await Promise.all([before, attempt, look])
    expect((await pttlCalls()) - calls).toBe(2)
    await redis.client().del(`${prefix}l:acme:k`)
  })

  it('is taken by one replica at a time, with a PX of lockMs', async () => {
    const [replicaA, replicaB, prefix] = await twoReplicas({ lockMs: 3_000 })
    const first = await replicaA.startLock.acquire('k', 'acme')
    expect(first.state).toBe('acquired')
    expect((await replicaB.startLock.acquire('k', 'acme')).state).toBe('held')
    const pttl = await redis.client().pttl(`${prefix}l:acme:k`)
    expect(pttl).toBeGreaterThan(2_000)
    expect(pttl).toBeLessThanOrEqual(3_000)
    if (first.state === 'acquired') await first.release()
    expect((await replicaB.startLock.acquire('k', 'acme')).state).toBe('acquired')
  })

  it('is renewed while its start runs: a start slower than its life is still the only one (SPEC 4)', async () => {
    // A life of 600 ms (renewed every 200) and a start of three lives: without renewal, B took the
    // lock and started too. Renewal has 400 ms to spare, for a test process sharing a loaded core.
    const [replicaA, replicaB] = await twoReplicas({ lockMs: 600, waitMs: 5_000 })
    const starts: string[] = []
    const start = (sessionId: string) => async (): Promise<StartResult<never>> => {
      starts.push(sessionId)
      await sleep(1_800)
      return { sessionId }
    }
    const first = startAcrossReplicas('k', 'acme', start('ses_a'), replicaA, replicaA.startLock)
    await sleep(20)
    const second = startAcrossReplicas('k', 'acme', start('ses_b'), replicaB, replicaB.startLock)
    expect(await first).toEqual({ result: { sessionId: 'ses_a' }, startedHere: true })
    expect(await second).toEqual({ result: { sessionId: 'ses_a' }, startedHere: false })
    expect(starts).toEqual(['ses_a'])
  })

  it('expires by itself, so a crashed owner does not hold the key', async () => {
    const [replicaA, replicaB] = await twoReplicas({ lockMs: 100 })
    expect((await replicaA.startLock.acquire('k', 'acme')).state).toBe('acquired')
    // A's process goes: nothing renews its lock.
    await replicaA.close()
    await sleep(150)
    expect((await replicaB.startLock.acquire('k', 'acme')).state).toBe('acquired')
  })

  it('leaves no lock behind when taking it timed out on a stalled Redis that then goes on, and counts the start made without it', async () => {
    let unavailable = 0
    const store = await openStore({ lockMs: 8_000, onUnavailable: () => unavailable++ })
    const lockKey = `t${prefixCount}:l:acme:k`
    // Every client but this one waits 1.5 s, past the store's 1 s command timeout; then Redis runs what was sent.
    await redis.client().call('CLIENT', 'PAUSE', '1500', 'ALL')
    const pauseEnds = Date.now() + 1_500
    expect((await store.startLock.acquire('k', 'acme')).state).toBe('unavailable')
    // SPEC 12: a start this replica makes without the store's lock is a request served without it.
    expect(unavailable).toBe(1)
    // The SET goes through once Redis goes on; then it is deleted, well before its 8 s would end.
    await sleep(Math.max(0, pauseEnds - Date.now()) + 100)
    await until(async () => (await redis.client().exists(lockKey)) === 0, 4_000)
  })

  it('counts a miss whose shared read the store lost going down as served without it, once with the lock that follows (SPEC 12)', async () => {
    const link = await startRedisProxy(redis.url)
    let unavailable = 0
    const store = await openStore({ url: link.url, onUnavailable: () => unavailable++ })
    link.hang()
    // Two requests share the read; the store goes down under it.
    const reads = [store.get('k', 'acme'), store.get('k', 'acme')]
    link.cut()
    expect(await Promise.all(reads)).toEqual([undefined, undefined])
    expect(unavailable).toBe(2)
    // Their starts then find the store down: counted already.
    expect((await store.startLock.acquire('k', 'acme')).state).toBe('unavailable')
    expect(unavailable).toBe(2)
  })

  it('deletes a lock the store took but whose answer the connection lost, once the store is back', async () => {
    const link = await startRedisProxy(redis.url)
    const keyPrefix = `t${++prefixCount}:`
    // A life of a minute: left, the lock would hold up every replica's miss on the key that long.
    const store = await openStore({ url: link.url, keyPrefix, lockMs: 60_000 })
    // The lock is taken by a script that answers the holder when it is held.
    link.loseReplyTo(/if held then return held end/)
    expect((await store.startLock.acquire('k', 'acme')).state).toBe('unavailable')
    expect(await redis.client().exists(`${keyPrefix}l:acme:k`)).toBe(1)
    await until(async () => (await redis.client().exists(`${keyPrefix}l:acme:k`)) === 0, 10_000)
  })

  // ioredis sends a command again on its next connection: the lock goes once the store is back.
  it('leaves no lock for its life when its release got no answer and the connection dropped', async () => {
    const link = await startRedisProxy(redis.url)
    const keyPrefix = `t${++prefixCount}:`
    const store = await openStore({ url: link.url, keyPrefix, lockMs: 60_000 })
    const taken = await store.startLock.acquire('k', 'acme')
    expect(taken.state).toBe('acquired')
    // The release goes nowhere (Redis stopped answering; the store's 1 s command timeout), then the connection drops.
    link.hang()
    if (taken.state === 'acquired') await taken.release()
    link.cut()
    expect(await redis.client().exists(`${keyPrefix}l:acme:k`)).toBe(1)
    link.restore()
    await until(async () => (await redis.client().exists(`${keyPrefix}l:acme:k`)) === 0, 10_000)
  })

  it('tells a waiter which owner holds the lock and how long that owner\'s start may take', async () => {
    const [replicaA, replicaB] = await twoReplicas({ waitMs: 7_000 })
    expect((await replicaA.startLock.acquire('k', 'acme')).state).toBe('acquired')
    const first = await replicaB.startLock.acquire('k', 'acme')
    const again = await replicaB.startLock.acquire('k', 'acme')
    expect(first).toMatchObject({ state: 'held', holderWaitMs: 7_000 })
    expect(first.state === 'held' && again.state === 'held' && first.holder === again.holder).toBe(true)
  })

  it('release leaves alone a lock that expired and was taken by another replica', async () => {
    const [replicaA, replicaB, prefix] = await twoReplicas({ lockMs: 100 })
    const stale = await replicaA.startLock.acquire('k', 'acme')
    // A's lock ended under it (Redis lost it, or a renewal did not get through in time).
    await redis.client().del(`${prefix}l:acme:k`)
    expect((await replicaB.startLock.acquire('k', 'acme')).state).toBe('acquired')
    const holder = await redis.client().get(`${prefix}l:acme:k`)
    if (stale.state === 'acquired') await stale.release()
    expect(await redis.client().get(`${prefix}l:acme:k`)).toBe(holder)
  })

  it('has a waiter wait for the start config\'s connect timeout, which a reload leaves in force, and the running upstream timeout', async () => {
    const config = configSchema.parse({ limits: { connectTimeoutMs: 5_000, upstreamTimeoutMs: 30_000 }, tenants: { acme: { upstream: { staging: 'http://127.0.0.1:9' } } } })
    const shared = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: `t${++prefixCount}:`, logger: pino({ level: 'silent' }) }), (store) => store.close())
    let limits = config.limits
    const sessions = createSessionStore(config, shared, pino({ level: 'silent' }), {}, () => limits) as RedisSessionStore
    expect(sessions.startLock.waitMs).toBe(5_000 + 30_000 + 1_000)
    // A reload: the upstream client keeps its connect timeout (restart-only); the upstream timeout is the new one.
    limits = { ...limits, connectTimeoutMs: 1_000, upstreamTimeoutMs: 10_000 }
    expect(sessions.startLock.waitMs).toBe(5_000 + 10_000 + 1_000)
  })

  it('is renewed only while it is its owner\'s: another holder\'s lock ends when its own life does', async () => {
    const [replicaA, , prefix] = await twoReplicas({ lockMs: 100 })
    expect((await replicaA.startLock.acquire('k', 'acme')).state).toBe('acquired')
    // A's lock ended under it, and a holder that renews nothing took the key for 300 ms.
    await redis.client().del(`${prefix}l:acme:k`)
    await redis.client().set(`${prefix}l:acme:k`, 'another-owner', 'PX', 300)
    // A renews every 33 ms: a renewal of any holder's lock would keep it for good.
    await until(async () => (await redis.client().exists(`${prefix}l:acme:k`)) === 0, 3_000)
  })
})

describe('createRedisSessionStore without a reachable Redis (the shared store keeps serving, SPEC 12)', () => {
  async function unreachableStore(): Promise<{ store: RedisSessionStore; logs: ReturnType<typeof createLogSink> }> {
    const logs = createLogSink()
    // A port nothing listens on: the test server's, after it was stopped would race; port 1 is never a Redis.
    const store = await openStore({ url: 'redis://user:hunter2-redis-password@127.0.0.1:1', logger: pino({}, logs.stream), connectWaitMs: 1_000 })
    return { store, logs }
  }

  it('starts and describes itself as down', async () => {
    const { store } = await unreachableStore()
    expect(store.describe()).toEqual({ kind: 'redis', redis: 'down' })
  })

  it("keeps serving from this replica's map: entries set then live their whole ttl locally", async () => {
    const { store } = await unreachableStore()
    await store.set('k', { sessionId: 'ses_local', tenant: 'acme' })
    expect(await store.get('k', 'acme')).toEqual({ sessionId: 'ses_local', tenant: 'acme' })
    expect(await store.countByTenant()).toEqual({ acme: 1 })
    expect(await store.clear('acme')).toBe(1)
  })

  it("reports an eviction of this replica's own entry while Redis is away, once", async () => {
    const { store } = await unreachableStore()
    await store.set('k', { sessionId: 'ses_local', tenant: 'acme' })
    expect(await store.deleteIfSession('k', 'ses_local', 'acme')).toBe(true)
    expect(await store.deleteIfSession('k', 'ses_local', 'acme')).toBe(false)
  })

  it('answers the start lock as unavailable at once', async () => {
    const { store } = await unreachableStore()
    const attempt = store.startLock.acquire('k', 'acme')
    // Settled within the turn of the event loop it was asked in: no wait on the connection.
    let settled = false
    void attempt.then(() => (settled = true))
    await new Promise((resolve) => setImmediate(resolve))
    expect(settled).toBe(true)
    expect((await attempt).state).toBe('unavailable')
  })

  it('logs the outage once, without the password of the URL', async () => {
    const { logs } = await unreachableStore()
    await sleep(500)
    const down = logs.lines().filter((line) => String(line.msg).startsWith('store redis is down'))
    expect(down).toHaveLength(1)
    expect(down[0]).toMatchObject({ level: 40, redis: 'redis://127.0.0.1:1' })
    expect(logs.text()).not.toContain('hunter2-redis-password')
  })
})
