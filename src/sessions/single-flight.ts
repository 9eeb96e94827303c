/**
 * Shares one in-flight call per key: concurrent callers of `run(key, fn)` get the same
 * promise, success or failure, and the key is free again once it settles (nothing cached).
 */
export interface SingleFlight<T> {
  run(key: string, call: () => Promise<T>): { promise: Promise<T>; shared: boolean }
  /** Frees the key now: the call under way goes on for those already waiting, a later `run` starts anew. */
  forget(key: string): void
  readonly inFlight: number
}

export function createSingleFlight<T>(): SingleFlight<T> {
  const calls = new Map<string, Promise<T>>()
  return {
    run(key, call) {
      const existing = calls.get(key)
      if (existing !== undefined) return { promise: existing, shared: true }
      const promise: Promise<T> = call().finally(() => {
        // Unless forgotten and taken again by a newer call.
        if (calls.get(key) === promise) calls.delete(key)
      })
      calls.set(key, promise)
      return { promise, shared: false }
    },
    forget(key) {
      calls.delete(key)
    },
    get inFlight() {
      return calls.size
    }
  }
}
