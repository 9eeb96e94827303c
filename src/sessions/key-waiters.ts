import type { CancelScope } from '../upstream/upstream-client.js'

/**
 * Callers waiting for a change of one key (an idempotency record answered or released), woken
 * at once by `wake`, or by their own timer: a waiter looks again either way, so a missed wake
 * costs a wait, never a wrong answer.
 */
export class KeyWaiters {
  readonly #waiters = new Map<string, Set<() => void>>()

  /** Resolves when `key` is woken, after `ms`, or when `scope` is cancelled (its client left: nobody waits any more). */
  wait(key: string, ms: number, scope?: CancelScope): Promise<void> {
    if (scope?.cancelled === true) return Promise.resolve()
    return new Promise((resolve) => {
      let waiting = this.#waiters.get(key)
      if (waiting === undefined) this.#waiters.set(key, (waiting = new Set()))
      const set = waiting
      const waiters = this.#waiters
      const timer = setTimeout(done, ms)
      if (scope !== undefined) scope.cancel = done
      function done(): void {
        clearTimeout(timer)
        if (scope?.cancel === done) scope.cancel = undefined
        set.delete(done)
        if (set.size === 0 && waiters.get(key) === set) waiters.delete(key)
        resolve()
      }
      set.add(done)
    })
  }

  wake(key: string): void {
    const waiting = this.#waiters.get(key)
    if (waiting === undefined) return
    this.#waiters.delete(key)
    for (const resolve of waiting) resolve()
  }
}
