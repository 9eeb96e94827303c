import { afterAll, beforeAll, onTestFinished } from 'vitest'

/**
 * Who closes what a helper starts. Every helper that opens a listener, a process or a server
 * comes in two forms, and both own their teardown, so that no test file writes a close:
 *
 * - `startX(...)`, called inside a test (or a `beforeEach`): closed when that test finishes,
 *   passed or failed, in reverse order of starting (a gateway before its upstream).
 * - `useX(...)`, called in a `describe` body (or at the top of a file): started in a
 *   `beforeAll`, closed in an `afterAll` after the last test of that block. It returns a handle
 *   that reads the started thing, so tests write `gw.url` as with `startX`.
 *
 * Closing twice is harmless: a test may close a thing itself (to test a shutdown) and the
 * teardown then waits for the same end.
 */

/** Makes `close` run once: later calls wait for the first. */
export function once(close: () => Promise<void> | void): () => Promise<void> {
  let closing: Promise<void> | undefined
  return () => (closing ??= Promise.resolve().then(close))
}

/**
 * Starts a thing for the running test and closes it when the test finishes. The hook is
 * registered before anything starts, so a call outside a test fails before it can leak.
 */
export async function ownedByTest<T>(helper: string, start: () => Promise<T>, close: (started: T) => Promise<void> | void): Promise<T> {
  const owned: { started?: T } = {}
  try {
    onTestFinished(async () => {
      if (owned.started !== undefined) await close(owned.started)
    })
  } catch (error) {
    throw new Error(`${helper}() closes what it starts when the running test finishes, so it belongs in a test or a beforeEach; for a whole describe, use its use…() form`, { cause: error })
  }
  owned.started = await start()
  return owned.started
}

/**
 * Starts a thing in a `beforeAll` of the enclosing block and closes it in an `afterAll` (which
 * runs even when a later `beforeAll` failed). The handle reads the started thing; reading it
 * before its `beforeAll` ran is a mistake and throws.
 */
export function ownedBySuite<T extends object>(helper: string, start: () => Promise<T>, close: (started: T) => Promise<void> | void): T {
  let started: T | undefined
  beforeAll(async () => {
    started = await start()
  })
  afterAll(async () => {
    if (started !== undefined) await close(started)
  })
  return new Proxy({} as T, {
    get(_target, property) {
      if (started === undefined) throw new Error(`${helper}(): read in a describe body or before its beforeAll ran; read it inside a test or a later hook`)
      return Reflect.get(started, property) as unknown
    },
    has(_target, property) {
      return started !== undefined && Reflect.has(started, property)
    }
  })
}
