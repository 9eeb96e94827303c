import { setTimeout as sleep } from 'node:timers/promises'

/** Polls `check` until it holds; fails the test after `timeoutMs`. For conditions no event announces. */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs = 5_000, intervalMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await sleep(intervalMs)
  }
}
