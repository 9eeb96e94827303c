import { setTimeout as sleep } from 'node:timers/promises'
import type { StartResult } from './session-map.js'
import type { SessionStore } from './session-store.js'

/** One try at a key's start lock. */
export type LockAttempt =
  | { state: 'acquired'; release(): Promise<void> }
  /** Another replica is starting this key's session. */
  | { state: 'held' }
  /** The shared store cannot be asked: this replica starts on its own (issue 7 point 4). */
  | { state: 'unavailable' }

/**
 * A short cross-replica lock per session-map key. It expires by itself, so a crashed owner
 * never blocks a key for longer than the lock's life (issue 7 point 4).
 */
export interface StartLock {
  acquire(key: string, tenant: string): Promise<LockAttempt>
  /** How long a waiter sleeps between two looks at the shared entry. */
  readonly pollMs: number
  /** How long a waiter waits at most before it starts without the lock. */
  readonly waitMs: number
  /** Called when a waiter gave up at `waitMs`. */
  onWaitExpired?(key: string): void
}

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

  const deadline = Date.now() + lock.waitMs
  for (;;) {
    const attempt = await lock.acquire(key, tenant)
    if (attempt.state === 'unavailable') return startHere()
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
      lock.onWaitExpired?.(key)
      return startHere()
    }
  }
}
