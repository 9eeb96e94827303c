import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it, vi } from 'vitest'
import { startAcrossReplicas } from '../../../src/sessions/distributed-start.js'
import { createSessionMap, type StartResult } from '../../../src/sessions/session-map.js'
import { createMemorySessionStore, type LockAttempt, type SessionStore, type StartLock } from '../../../src/sessions/session-store.js'

type Rejection = { status: number }

/** A lock shared by "replicas" in one process, with an expiry like `SET NX PX`. */
function sharedLock(options: { lockMs?: number; waitMs?: number; unavailable?: boolean } = {}): StartLock & { holders: Map<string, number>; onWaitExpired: ReturnType<typeof vi.fn> } {
  const holders = new Map<string, number>()
  const lockMs = options.lockMs ?? 1_000
  return {
    holders,
    pollMs: 5,
    waitMs: options.waitMs ?? lockMs + 500,
    onWaitExpired: vi.fn(),
    async acquire(key): Promise<LockAttempt> {
      if (options.unavailable === true) return { state: 'unavailable' }
      const expiresAt = holders.get(key)
      if (expiresAt !== undefined && expiresAt > Date.now()) return { state: 'held' }
      const mine = Date.now() + lockMs
      holders.set(key, mine)
      return {
        state: 'acquired',
        async release() {
          if (holders.get(key) === mine) holders.delete(key)
        }
      }
    }
  }
}

/** One store seen by every replica, as Redis would be. */
function sharedStore(): SessionStore {
  return createMemorySessionStore({ maxEntries: 100, ttlMs: 60_000 })
}

function slowStart(sessionId: string, delayMs = 30) {
  return vi.fn(async (): Promise<StartResult<Rejection>> => {
    await sleep(delayMs)
    return { sessionId }
  })
}

describe('startAcrossReplicas (one session per identity across replicas, SPEC 4)', () => {
  it('starts once for concurrent first calls on three replicas and lets the others read the winner', async () => {
    const store = sharedStore()
    const lock = sharedLock()
    const starts = [slowStart('ses_a'), slowStart('ses_b'), slowStart('ses_c')]
    const results = await Promise.all(starts.map((start) => startAcrossReplicas('k', 'acme', start, store, lock)))
    expect(starts.reduce((sum, start) => sum + start.mock.calls.length, 0)).toBe(1)
    expect(new Set(results.map((started) => started.result.sessionId)).size).toBe(1)
    expect(results.filter((started) => started.startedHere)).toHaveLength(1)
    expect(lock.holders.size).toBe(0)
  })

  it('lets a waiter start itself when the owner fails and leaves no entry', async () => {
    const store = sharedStore()
    const lock = sharedLock()
    const failing = vi.fn(async (): Promise<StartResult<Rejection>> => {
      await sleep(20)
      return { rejection: { status: 503 } }
    })
    const waiterStart = slowStart('ses_waiter', 1)
    const owner = startAcrossReplicas('k', 'acme', failing, store, lock)
    await sleep(1)
    const waiter = startAcrossReplicas('k', 'acme', waiterStart, store, lock)
    expect((await owner).result.rejection).toEqual({ status: 503 })
    expect(await waiter).toEqual({ result: { sessionId: 'ses_waiter' }, startedHere: true })
    expect(await store.get('k')).toEqual({ sessionId: 'ses_waiter', tenant: 'acme' })
  })

  it('takes the lock of a crashed owner once it expires, not before', async () => {
    const store = sharedStore()
    // waitMs well past the crashed owner's lock: a start here at waitMs would be the other path.
    const lock = sharedLock({ lockMs: 150, waitMs: 60_000 })
    const crashedUntil = Date.now() + 150
    lock.holders.set('k', crashedUntil)
    let startedAt = 0
    const start = vi.fn(async (): Promise<StartResult<Rejection>> => {
      startedAt = Date.now()
      return { sessionId: 'ses_1' }
    })
    const started = await startAcrossReplicas('k', 'acme', start, store, lock)
    expect(started).toEqual({ result: { sessionId: 'ses_1' }, startedHere: true })
    // It took the lock (not the give-up path), once the crashed owner's had ended.
    expect(lock.onWaitExpired).not.toHaveBeenCalled()
    expect(startedAt).toBeGreaterThanOrEqual(crashedUntil)
  })

  it('starts here without waiting when the shared store is unavailable', async () => {
    const start = slowStart('ses_local', 1)
    const started = await startAcrossReplicas('k', 'acme', start, sharedStore(), sharedLock({ unavailable: true }))
    expect(started).toEqual({ result: { sessionId: 'ses_local' }, startedHere: true })
  })

  it('gives up waiting at waitMs and starts here, saying so', async () => {
    const lock = sharedLock({ lockMs: 10_000, waitMs: 60 })
    lock.holders.set('k', Date.now() + 10_000)
    const started = await startAcrossReplicas('k', 'acme', slowStart('ses_late', 1), sharedStore(), lock)
    expect(started.startedHere).toBe(true)
    expect(lock.onWaitExpired).toHaveBeenCalledWith('k', expect.any(Number))
  })

  it('waits for a new owner as long as its bound, but never past two of the longest bounds from its arrival', async () => {
    // Each look finds another owner (a client retrying each failure on another replica wins the
    // lock each time): a wait started again at each would never end.
    let owners = 0
    // Bounds long beside a poll, so that a pause of the machine cannot end the wait early.
    const lock: StartLock & { onWaitExpired: ReturnType<typeof vi.fn> } = {
      pollMs: 5,
      waitMs: 400,
      onWaitExpired: vi.fn(),
      async acquire(): Promise<LockAttempt> {
        return { state: 'held', holder: `owner-${++owners}`, holderWaitMs: 800 }
      }
    }
    const started = await startAcrossReplicas('k', 'acme', slowStart('ses_own', 1), sharedStore(), lock)
    expect(started.startedHere).toBe(true)
    const waited = lock.onWaitExpired.mock.calls[0]?.[1] as number
    // Two of the longest bound (the owners' 800 ms), not the waiter's own 400 ms, and then it ended.
    expect(waited).toBeGreaterThanOrEqual(1_600)
    expect(waited).toBeLessThan(2_400)
    expect(owners).toBeGreaterThan(2)
  })

  it('waits the owner\'s longer bound, counted from when that owner took over', async () => {
    // A first owner (bound 200 ms) for 100 ms, then a second (150 ms): the wait ends 150 ms after
    // the takeover, not 200 ms after the arrival (50 ms after it).
    const arrivedAt = Date.now()
    let takeoverAt: number | undefined
    let expiredAt = 0
    const lock: StartLock = {
      pollMs: 5,
      waitMs: 30,
      onWaitExpired: () => void (expiredAt = Date.now()),
      async acquire(): Promise<LockAttempt> {
        if (Date.now() - arrivedAt < 100) return { state: 'held', holder: 'first', holderWaitMs: 200 }
        takeoverAt ??= Date.now()
        return { state: 'held', holder: 'second', holderWaitMs: 150 }
      }
    }
    await startAcrossReplicas('k', 'acme', slowStart('ses_own', 1), sharedStore(), lock)
    expect(takeoverAt).toBeDefined()
    expect(expiredAt - (takeoverAt as number)).toBeGreaterThanOrEqual(150)
  })

  it('does not start when the previous owner stored its session just before the lock was taken', async () => {
    const store = sharedStore()
    store.set('k', { sessionId: 'ses_stored', tenant: 'acme' })
    const start = slowStart('ses_new', 1)
    const started = await startAcrossReplicas('k', 'acme', start, store, sharedLock())
    expect(started).toEqual({ result: { sessionId: 'ses_stored' }, startedHere: false })
    expect(start).not.toHaveBeenCalled()
  })
})

describe('createSessionMap with a store shared by replicas', () => {
  it('reports a session another replica started as coalesced', async () => {
    const store = sharedStore()
    const lock = sharedLock()
    const withLock: SessionStore = {
      get: (key) => store.get(key),
      set: (key, entry) => store.set(key, entry),
      deleteIfSession: (key, sessionId, tenant) => store.deleteIfSession(key, sessionId, tenant),
      clear: (tenant) => store.clear(tenant),
      countByTenant: () => store.countByTenant(),
      size: 0,
      describe: () => ({ kind: 'shared-test' }),
      startLock: lock
    }
    const replicaA = createSessionMap<Rejection>(withLock)
    const replicaB = createSessionMap<Rejection>(withLock)
    const [a, b] = await Promise.all([replicaA.resolve('k', 'acme', slowStart('ses_a')), replicaB.resolve('k', 'acme', slowStart('ses_b'))])
    expect([a.outcome, b.outcome].sort()).toEqual(['coalesced', 'miss'])
    expect(a.result.sessionId).toBe(b.result.sessionId)
  })
})
