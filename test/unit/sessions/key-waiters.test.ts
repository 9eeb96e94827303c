import { describe, expect, it } from 'vitest'
import { KeyWaiters } from '../../../src/sessions/key-waiters.js'
import type { CancelScope } from '../../../src/upstream/upstream-client.js'

/** Whether `promise` has settled within the turns it takes a timer of 0 ms to fire. */
async function settledSoon(promise: Promise<unknown>): Promise<boolean> {
  let settled = false
  void promise.then(() => (settled = true))
  await new Promise((resolve) => setTimeout(resolve, 0))
  return settled
}

describe('KeyWaiters', () => {
  it('wakes the waiters of one key only', async () => {
    const waiters = new KeyWaiters()
    const a = waiters.wait('a', 60_000)
    const b = waiters.wait('b', 60_000)
    waiters.wake('a')
    expect(await settledSoon(a)).toBe(true)
    expect(await settledSoon(b)).toBe(false)
    waiters.wake('b')
    await b
  })

  it('ends a wait when its scope is cancelled (its client left), and hands the scope back', async () => {
    const waiters = new KeyWaiters()
    const scope: CancelScope = { cancelled: false, cancel: undefined }
    const waiting = waiters.wait('k', 60_000, scope)
    expect(await settledSoon(waiting)).toBe(false)
    scope.cancelled = true
    scope.cancel?.()
    expect(await settledSoon(waiting)).toBe(true)
    expect(scope.cancel).toBeUndefined()
    // A scope cancelled already does not wait at all.
    expect(await settledSoon(waiters.wait('k', 60_000, scope))).toBe(true)
  })

  it('lets go of the scope when the key is woken first', async () => {
    const waiters = new KeyWaiters()
    const scope: CancelScope = { cancelled: false, cancel: undefined }
    const waiting = waiters.wait('k', 60_000, scope)
    waiters.wake('k')
    await waiting
    expect(scope.cancel).toBeUndefined()
  })
})
