/**
 * Shares one in-flight call per key: concurrent callers of `run(key, fn)` get the same
 * promise, success or failure, and the key is free again once it settles (nothing cached).
 */
export interface SingleFlight<T> {
  run(key: string, call: () => Promise<T>): { promise: Promise<T>; shared: boolean }
  readonly inFlight: number
}

export function createSingleFlight<T>(): SingleFlight<T> {
  const calls = new Map<string, Promise<T>>()
  return {
    run(key, call) {
      const existing = calls.get(key)
      if (existing !== undefined) return { promise: existing, shared: true }
      const promise = call().finally(() => calls.delete(key))
      calls.set(key, promise)
      return { promise, shared: false }
    },
    get inFlight() {
      return calls.size
    }
  }
}
