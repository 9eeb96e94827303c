import { randomUUID } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { buildErrorBody } from '../errors/error-body.js'
import { GatewayError } from '../errors/registry.js'

function toGatewayError(code: string | undefined): GatewayError {
  if (code === 'HPE_HEADER_OVERFLOW') return new GatewayError('REQUEST_HEADERS_TOO_LARGE', 'the request headers are too large')
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return new GatewayError('REQUEST_TIMEOUT', 'the request was not received in time')
  return new GatewayError('INVALID_REQUEST', 'the request is not valid HTTP/1.1')
}

/**
 * Answers requests Node's parser refuses (malformed framing, `Content-Length` with
 * `Transfer-Encoding`, oversized headers) in the SPEC 6 envelope, then closes the connection,
 * as RFC 9112 11.2 asks after a framing error. Only the error code is logged: Node attaches the
 * raw request bytes, credentials included, to parser errors.
 */
export function answerClientError(log: Logger, error: Error & { code?: string }, socket: Duplex, onAnswered?: (gatewayError: GatewayError) => void): void {
  // Our bytes must not land inside an answer already under way, nor be read as the answer to an
  // earlier request that was fine (a malformed pipelined one after it): cut the connection then.
  // Node's default handler, which a `clientError` listener replaces, guards the first case only.
  if (error.code === 'ECONNRESET' || !socket.writable || answerWouldMislead(socket)) {
    socket.destroy()
    return
  }
  const gatewayError = toGatewayError(error.code)
  const requestId = randomUUID()
  log.info({ requestId, code: error.code, status: gatewayError.statusCode, error: gatewayError.code }, 'malformed request refused')
  onAnswered?.(gatewayError)
  endWithError(socket, gatewayError, requestId)
}

/**
 * Whether a 400 now would corrupt or misattribute an answer: node:http's response in progress on
 * this socket (its `_httpMessage`, as Node's own socketOnError reads it) has sent its head, or
 * belongs to a request that was read whole, so the error is about a later one.
 */
function answerWouldMislead(socket: Duplex): boolean {
  const current = (socket as Duplex & { _httpMessage?: { writableFinished: boolean; headersSent: boolean; req?: { complete: boolean } } | null })._httpMessage
  if (current === undefined || current === null || current.writableFinished) return false
  return current.headersSent || current.req?.complete === true
}

/**
 * CONNECT asks for a tunnel, which only a forward proxy gives (SPEC 2: never an open proxy).
 * Node hands it to the 'connect' event, not to the request listener, and would otherwise drop the socket.
 */
export function answerConnect(log: Logger, socket: Duplex, onAnswered?: (gatewayError: GatewayError) => void): void {
  const requestId = randomUUID()
  log.info({ requestId, status: 400, error: 'INVALID_REQUEST' }, 'CONNECT refused')
  const refusal = new GatewayError('INVALID_REQUEST', 'CONNECT is not served: this gateway is not a forward proxy')
  onAnswered?.(refusal)
  endWithError(socket, refusal, requestId)
}

/**
 * How long a refused connection may stay half-open after the answer: the client reads it and
 * closes its side; one that does not is cut then (Node sets no timeout on a CONNECT socket, and
 * the listener allows half-open connections, so it would otherwise hold the drain open).
 */
const LINGER_MS = 1_000

function endWithError(socket: Duplex, gatewayError: GatewayError, requestId: string): void {
  const body = JSON.stringify(buildErrorBody(gatewayError, requestId, 0))
  socket.end(
    `HTTP/1.1 ${gatewayError.statusCode} ${STATUS_CODES[gatewayError.statusCode] ?? ''}\r\n` +
      'content-type: application/json; charset=utf-8\r\n' +
      `content-length: ${Buffer.byteLength(body)}\r\n` +
      `x-request-id: ${requestId}\r\n` +
      'connection: close\r\n\r\n' +
      body,
    () => {
      // Not at once: a reset could reach the client before it has read the answer.
      const linger = setTimeout(() => socket.destroy(), LINGER_MS).unref()
      socket.once('close', () => clearTimeout(linger))
    }
  )
}
