import { setTimeout as sleep } from 'node:timers/promises'

/** Polls `check` until it holds; fails the test after `timeoutMs`. For conditions no event announces. */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs = 5_000, intervalMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await sleep(intervalMs)
  }
}

/** Rejects with `message` unless `promise` settles within `ms`. */
export function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
