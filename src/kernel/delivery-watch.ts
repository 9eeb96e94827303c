import { ERROR_STATUS } from '../errors/registry.js'
import { watchBacklog } from '../util/backlog-watch.js'
import { cutAnswer } from './connection-close.js'
import type { Exchange } from './exchange.js'

/** A whole answer goes out a slice of this size at a time, so a reader's progress shows slice by slice. */
const SLICE_BYTES = 16 * 1024

/**
 * SPEC 10: writes a whole answer body (a legacy answer, up to 16 MiB) and cuts a client that takes
 * none of it for `stallMs`, as one that stops reading a streamed answer is (upstream-client.ts):
 * Node emits no 'finish' for an answer its client does not take, so its in-flight slot and its
 * bytes would stay for as long as the client keeps the connection open. A large body is written
 * one slice at a time, the next once the socket took the last (its write callback; Node would
 * batch slices written together into one write, whose progress shows only at its end), so a
 * reader that takes a slice per `stallMs` is waited for. Its line says 408 and counts the bytes
 * written. An answer the socket takes at once, the usual case, costs no timer.
 */
export function deliver(exchange: Exchange, payload: Buffer | string | undefined, payloadBytes: number, stallMs: number): void {
  const response = exchange.response
  if (payload === undefined || payloadBytes <= SLICE_BYTES) {
    response.end(payload)
    exchange.record.bytesOut += payloadBytes
    // What the socket did not take at once (its buffers full): watched until it is taken.
    if (response.writableLength > 0 && !response.writableFinished) response.once('close', watchBacklog(response, stallMs, () => cutStalledReader(exchange), () => waitsForTurn(exchange)))
    return
  }
  const bytes = typeof payload === 'string' ? Buffer.from(payload) : payload
  let offset = 0
  // Each slice must be taken within stallMs of the last, or of its turn on a pipelined connection.
  const timer = setTimeout(function sliceStalled() {
    if (waitsForTurn(exchange)) timer.refresh()
    else cutStalledReader(exchange)
  }, stallMs)
  const stop = (): void => clearTimeout(timer)
  response.once('close', stop)
  const next = (error?: Error | null): void => {
    if (error != null || response.destroyed) return stop()
    if (offset >= bytes.length) {
      stop()
      response.off('close', stop)
      response.end()
      return
    }
    const end = Math.min(offset + SLICE_BYTES, bytes.length)
    const slice = bytes.subarray(offset, end)
    offset = end
    exchange.record.bytesOut += slice.length
    timer.refresh()
    response.write(slice, next)
  }
  next()
}

/**
 * SPEC 10: a client that stopped reading its answer for the upstream limit is cut, as a stalled
 * upload is (body-stall.ts); its end (in-flight slot freed, upstream call cancelled) follows the
 * response's close, and its line says 408.
 */
export function cutStalledReader(exchange: Exchange): void {
  const response = exchange.response
  if (response.writableFinished || response.destroyed) return
  exchange.record.errorCode = 'REQUEST_TIMEOUT'
  exchange.record.brokenOffStatus = ERROR_STATUS.REQUEST_TIMEOUT
  cutAnswer(response, exchange.connection)
}

/**
 * An answer queued behind a pipelined one has no socket until the answers before it have gone: it
 * waits for its turn, not for its reader. Not once its connection is gone (Node never closes such
 * an answer): then the watch ends it.
 */
export function waitsForTurn(exchange: Exchange): boolean {
  return exchange.response.socket === null && !exchange.connection.destroyed
}
