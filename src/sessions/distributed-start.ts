import { setTimeout as sleep } from 'node:timers/promises'
import type { SessionStore, StartLock } from './session-store.js'

/** What `sessions.start` gave: a session id, or an answer to hand back to the client as it came. */
export type StartResult<TRejection> = { sessionId: string; rejection?: undefined } | { sessionId?: undefined; rejection: TRejection }

export interface StartedSession<TRejection> {
  result: StartResult<TRejection>
  /** False when the session was started by another replica and read from the shared store. */
  startedHere: boolean
}

/**
 * SPEC 4 step 3 across replicas: the replica that takes the key's lock starts the session and
 * stores it before it lets the lock go; the others poll the shared entry. When the lock goes
 * away without an entry (the owner failed, or its lock expired), a waiter takes the lock and
 * starts itself. Callers on one replica already share this through the in-process single-flight.
 */
export async function startAcrossReplicas<TRejection>(
  key: string,
  tenant: string,
  start: () => Promise<StartResult<TRejection>>,
  store: SessionStore,
  lock: StartLock
): Promise<StartedSession<TRejection>> {
  async function startHere(): Promise<StartedSession<TRejection>> {
    const result = await start()
    if (result.sessionId !== undefined) await store.set(key, { sessionId: result.sessionId, tenant })
    return { result, startedHere: true }
  }

  const arrivedAt = Date.now()
  let deadline = arrivedAt + lock.waitMs
  let longestBound = lock.waitMs
  let holder: string | undefined
  for (;;) {
    const attempt = await lock.acquire(key, tenant)
    if (attempt.state === 'unavailable') return startHere()
    if (attempt.state === 'held' && attempt.holder !== undefined && attempt.holder !== holder) {
      // Another owner's start (the last one failed or its lock expired): the wait is for this
      // one, as long as its own config lets it take, not what is left of the wait for the last.
      // Never past two of the longest bounds seen from the arrival, however often owners change
      // (a client retrying each failure on another replica may win the lock each time): then a
      // second session, never a wait without end.
      holder = attempt.holder
      const bound = Math.max(lock.waitMs, attempt.holderWaitMs ?? 0)
      longestBound = Math.max(longestBound, bound)
      deadline = Math.min(Date.now() + bound, arrivedAt + 2 * longestBound)
    }
    if (attempt.state === 'acquired') {
      try {
        // The previous owner stores its session before it releases: look once more before starting.
        const entry = await store.get(key, tenant)
        if (entry !== undefined) return { result: { sessionId: entry.sessionId }, startedHere: false }
        return await startHere()
      } finally {
        await attempt.release()
      }
    }
    await sleep(lock.pollMs)
    const entry = await store.get(key, tenant)
    if (entry !== undefined) return { result: { sessionId: entry.sessionId }, startedHere: false }
    if (Date.now() >= deadline) {
      lock.onWaitExpired?.(key, Date.now() - arrivedAt)
      return startHere()
    }
  }
}
