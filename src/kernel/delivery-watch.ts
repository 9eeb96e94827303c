import { ERROR_STATUS } from '../errors/registry.js'
import type { Exchange } from './exchange.js'

/** A whole answer goes out in slices of Node's own write buffer size, so a reader's progress shows slice by slice. */
const SLICE_BYTES = 16 * 1024

/**
 * SPEC 10: writes a whole answer body (a legacy answer, up to 16 MiB) and cuts a client that takes
 * none of it for `stallMs`, as one that stops reading a streamed answer is (upstream-client.ts):
 * Node emits no 'finish' for an answer its client does not take, so its in-flight slot and its
 * bytes would stay for as long as the client keeps the connection open. A large body is written a
 * slice at a time, as the client takes it (one write of it all would show no progress until the
 * last byte went), so a reader that takes a slice per `stallMs` is waited for. Its line says 408
 * and counts the bytes written. An answer the socket takes at once, the usual case, costs no timer.
 */
export function deliver(exchange: Exchange, payload: Buffer | string | undefined, payloadBytes: number, stallMs: number): void {
  const response = exchange.response
  if (payload === undefined || payloadBytes <= SLICE_BYTES) {
    response.end(payload)
    exchange.record.bytesOut += payloadBytes
    // What the socket did not take at once (its buffers full): watched until it is taken.
    if (response.writableLength > 0 && !response.writableFinished) watchBacklog(exchange, stallMs)
    return
  }
  const bytes = typeof payload === 'string' ? Buffer.from(payload) : payload
  let offset = 0
  const pump = (): void => {
    while (offset < bytes.length) {
      if (response.destroyed) return
      const next = Math.min(offset + SLICE_BYTES, bytes.length)
      const more = response.write(bytes.subarray(offset, next))
      exchange.record.bytesOut += next - offset
      offset = next
      if (!more && offset < bytes.length) {
        const stop = watchBacklog(exchange, stallMs)
        response.once('drain', () => {
          stop()
          pump()
        })
        return
      }
    }
    response.end()
    watchBacklog(exchange, stallMs)
  }
  pump()
}

/**
 * Cuts the exchange's client (408 on its line) once the response's bytes waiting for it have not
 * shrunk for `stallMs`, looked at again while they shrink; nothing when none wait. Ends by itself
 * when the response finishes or closes, or when the returned function is called.
 */
function watchBacklog(exchange: Exchange, stallMs: number): () => void {
  const response = exchange.response
  let backlog = response.writableLength
  if (backlog === 0 || response.writableFinished) return noop
  let timer: NodeJS.Timeout | undefined
  const stop = (): void => {
    clearTimeout(timer)
    response.off('close', stop)
    response.off('finish', stop)
  }
  const look = (): void => {
    const now = response.writableLength
    if (now < backlog || waitsForTurn(exchange)) {
      backlog = now
      timer = setTimeout(look, stallMs)
      return
    }
    stop()
    if (response.writableFinished || response.destroyed) return
    exchange.record.errorCode = 'REQUEST_TIMEOUT'
    exchange.record.brokenOffStatus = ERROR_STATUS.REQUEST_TIMEOUT
    response.destroy()
  }
  timer = setTimeout(look, stallMs)
  response.once('close', stop)
  response.once('finish', stop)
  return stop
}

/**
 * An answer queued behind a pipelined one has no socket until the answers before it have gone: it
 * waits for its turn, not for its reader. Not once its connection is gone (Node never closes such
 * an answer): then the watch ends it.
 */
function waitsForTurn(exchange: Exchange): boolean {
  return exchange.response.socket === null && exchange.request.socket?.destroyed !== true
}

function noop(): void {}
