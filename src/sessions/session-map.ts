import type { SessionOutcome } from '../observability/session-events.js'
import { startAcrossReplicas, type StartedSession, type StartResult } from './distributed-start.js'
import { createSingleFlight } from './single-flight.js'
import type { SessionEntry, SessionStore } from './session-store.js'

// Callers of the map name what their `start` gives, and what the map did, in the map's own words.
export type { SessionOutcome, StartResult }

export interface ResolvedSession<TRejection> {
  result: StartResult<TRejection>
  outcome: Exclude<SessionOutcome, 'stale-retry'>
}

export interface SessionMap<TRejection> {
  /**
   * The session for `key`: from the store, or started once by `start` however many callers
   * miss at the same time (SPEC 4 step 3). Only a started session is stored; a rejection or a
   * thrown error reaches every waiter and leaves nothing behind. A hit the store answers at once
   * (the in-memory LRU, a replica's local copy) comes back as it is, not as a promise: the hit
   * path is the hot one, and a promise there costs turns of the microtask queue.
   */
  resolve(key: string, tenant: string, start: () => Promise<StartResult<TRejection>>): ResolvedSession<TRejection> | Promise<ResolvedSession<TRejection>>
  evict(key: string, tenant: string, sessionId: string): Promise<void>
  readonly store: SessionStore
}

function hit<TRejection>(entry: SessionEntry): ResolvedSession<TRejection> {
  return { result: { sessionId: entry.sessionId }, outcome: 'hit' }
}

export interface SessionMapHooks {
  /** An entry left on a stale or 401 answer (once per entry). */
  onEvict?: () => void
  /**
   * A start failed: once per start, however many requests shared it, and whether or not any of
   * them is still waiting (SPEC 17 counts each failed call once; the request that sent it may be gone).
   */
  onStartFailed?: (tenant: string, error: unknown) => void
}

export function createSessionMap<TRejection>(store: SessionStore, hooks: SessionMapHooks = {}): SessionMap<TRejection> {
  const starts = createSingleFlight<StartedSession<TRejection>>()

  async function startAndStore(key: string, tenant: string, start: () => Promise<StartResult<TRejection>>): Promise<StartedSession<TRejection>> {
    try {
      // A store shared by replicas also makes the start single across them (SPEC 4 step 3).
      if (store.startLock !== undefined) return await startAcrossReplicas(key, tenant, start, store, store.startLock)
      const result = await start()
      if (result.sessionId !== undefined) await store.set(key, { sessionId: result.sessionId, tenant })
      return { result, startedHere: true }
    } catch (error) {
      hooks.onStartFailed?.(tenant, error)
      throw error
    }
  }

  async function startOnce(key: string, tenant: string, start: () => Promise<StartResult<TRejection>>): Promise<ResolvedSession<TRejection>> {
    const { promise, shared } = starts.run(key, () => startAndStore(key, tenant, start))
    const started = await promise
    // A session another replica started is "coalesced": it may be stale-retried (SPEC 4 step 5).
    return { result: started.result, outcome: shared || !started.startedHere ? 'coalesced' : 'miss' }
  }

  return {
    store,
    resolve(key, tenant, start) {
      const entry = store.get(key, tenant)
      if (entry === undefined) return startOnce(key, tenant, start)
      // Any thenable, not only a native promise: a store given by an embedder may use its own.
      if (typeof (entry as Partial<PromiseLike<unknown>>).then === 'function') {
        return Promise.resolve(entry).then((found) => (found === undefined ? startOnce(key, tenant, start) : hit(found)))
      }
      return hit(entry as SessionEntry)
    },
    async evict(key, tenant, sessionId) {
      // Counted once per entry: requests that share a session all see its stale or 401 answer.
      if (await store.deleteIfSession(key, sessionId, tenant)) hooks.onEvict?.()
    }
  }
}
