import type { Writable } from 'node:stream'

/**
 * SPEC 10's look at a reader's pace: calls `stalled` once the bytes `body` holds for its reader
 * have not shrunk for `stallMs`. A reader that took some (the backlog shrank) is slow, not
 * stalled, and is looked at again, as is a body that `waitsForTurn` (an answer queued behind a
 * pipelined one, whose backlog cannot shrink before its turn). Progress shows a write at a time.
 * The watch ends by itself when `body` finishes (nothing waits any more), or when the returned
 * function is called (a caller that stops at 'close' says so: while paused, a closed body is
 * still reported, for the caller to cut what it holds).
 */
export function watchBacklog(body: Writable, stallMs: number, stalled: () => void, waitsForTurn?: () => boolean): () => void {
  let backlog = body.writableLength
  let timer: NodeJS.Timeout | undefined
  const stop = (): void => {
    clearTimeout(timer)
    body.off('finish', stop)
  }
  const look = (): void => {
    if (body.writableFinished) return stop()
    const now = body.writableLength
    if (now < backlog || waitsForTurn?.() === true) {
      backlog = now
      timer = setTimeout(look, stallMs)
      return
    }
    stop()
    stalled()
  }
  timer = setTimeout(look, stallMs)
  body.once('finish', stop)
  return stop
}
