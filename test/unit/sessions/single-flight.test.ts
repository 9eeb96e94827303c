import { describe, expect, it, vi } from 'vitest'
import { createSingleFlight } from '../../../src/sessions/single-flight.js'

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void
  let reject!: (error: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

describe('createSingleFlight', () => {
  it('calls once for concurrent callers of one key and gives them all the same result', async () => {
    const flight = createSingleFlight<string>()
    const gate = deferred<string>()
    const call = vi.fn(() => gate.promise)
    const runs = Array.from({ length: 50 }, () => flight.run('k', call))
    // All 50 are waiting on the one call before it settles: they overlap by construction, not by timing.
    expect(flight.inFlight).toBe(1)
    expect(runs.map((run) => run.shared)).toEqual([false, ...Array<boolean>(49).fill(true)])
    expect(call).toHaveBeenCalledTimes(1)
    gate.resolve('ses_1')
    const results = await Promise.all(runs.map((run) => run.promise))
    expect(call).toHaveBeenCalledTimes(1)
    expect(new Set(results)).toEqual(new Set(['ses_1']))
  })

  it('marks the first caller as not shared and every later concurrent caller as shared', async () => {
    const flight = createSingleFlight<string>()
    const gate = deferred<string>()
    const first = flight.run('k', () => gate.promise)
    const second = flight.run('k', () => Promise.resolve('other'))
    expect(first.shared).toBe(false)
    expect(second.shared).toBe(true)
    gate.resolve('ses_1')
    await expect(second.promise).resolves.toBe('ses_1')
  })

  it('gives the same rejection to every concurrent caller', async () => {
    const flight = createSingleFlight<string>()
    const gate = deferred<string>()
    const call = vi.fn(() => gate.promise)
    const runs = Array.from({ length: 10 }, () => flight.run('k', call))
    const failure = new Error('start failed')
    gate.reject(failure)
    const settled = await Promise.allSettled(runs.map((run) => run.promise))
    expect(call).toHaveBeenCalledTimes(1)
    for (const outcome of settled) expect(outcome).toEqual({ status: 'rejected', reason: failure })
  })

  it('frees the key after a success, so the next call runs again (nothing cached)', async () => {
    const flight = createSingleFlight<number>()
    let calls = 0
    const call = async (): Promise<number> => ++calls
    await flight.run('k', call).promise
    const again = flight.run('k', call)
    expect(again.shared).toBe(false)
    await expect(again.promise).resolves.toBe(2)
  })

  it('frees the key after a failure, so the next call runs again', async () => {
    const flight = createSingleFlight<string>()
    await expect(flight.run('k', () => Promise.reject(new Error('boom'))).promise).rejects.toThrow('boom')
    await expect(flight.run('k', () => Promise.resolve('ok')).promise).resolves.toBe('ok')
    expect(flight.inFlight).toBe(0)
  })

  it('does not share calls between different keys', async () => {
    const flight = createSingleFlight<string>()
    const a = flight.run('a', () => Promise.resolve('A'))
    const b = flight.run('b', () => Promise.resolve('B'))
    expect(b.shared).toBe(false)
    await expect(a.promise).resolves.toBe('A')
    await expect(b.promise).resolves.toBe('B')
  })

  it('counts the keys in flight until each settles', async () => {
    const flight = createSingleFlight<string>()
    const gate = deferred<string>()
    const run = flight.run('a', () => gate.promise)
    flight.run('a', () => gate.promise)
    const other = flight.run('b', () => Promise.resolve('B'))
    expect(flight.inFlight).toBe(2)
    await other.promise
    expect(flight.inFlight).toBe(1)
    gate.resolve('A')
    await run.promise
    expect(flight.inFlight).toBe(0)
  })
})
