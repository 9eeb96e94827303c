import { randomUUID } from 'node:crypto'
import { STATUS_CODES, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { Logger } from 'pino'
import { buildErrorBody, ERROR_CONTENT_TYPE } from '../errors/error-body.js'
import { GatewayError } from '../errors/registry.js'
import { cutConnection, inAnsweredBody, isClosing, markClosing } from './connection-close.js'

function toGatewayError(code: string | undefined): GatewayError {
  if (code === 'HPE_HEADER_OVERFLOW') return new GatewayError('REQUEST_HEADERS_TOO_LARGE', 'the request headers are too large')
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return new GatewayError('REQUEST_TIMEOUT', 'the request was not received in time')
  return new GatewayError('INVALID_REQUEST', 'the request is not valid HTTP/1.1')
}

/**
 * A request Node refused before the gateway saw it, as its answer went: what its access line can
 * say (SPEC 17). Nothing of it was parsed but, for CONNECT, its method.
 */
export interface RefusedUnread {
  readonly requestId: string
  readonly method: string | undefined
  readonly clientAddress: string | undefined
  readonly bytesOut: number
}

/**
 * Answers requests Node's parser refuses (malformed framing, `Content-Length` with
 * `Transfer-Encoding`, oversized headers) in the SPEC 6 envelope, then closes the connection,
 * as RFC 9112 11.2 asks after a framing error: one answer per request, and nothing read after
 * it. Only the error code is logged: Node attaches the raw request bytes, credentials included,
 * to parser errors. With `onAnswered` (the traffic listener), the request's access line is its
 * record; without (the admin listener), an info line is.
 */
export function answerClientError(
  log: Logger,
  error: Error & { code?: string },
  socket: Duplex,
  onAnswered?: (gatewayError: GatewayError, refused: RefusedUnread) => void,
  answerBrokenBody?: (response: ServerResponse, gatewayError: GatewayError) => boolean
): void {
  if (error.code === 'ECONNRESET') {
    socket.destroy()
    return
  }
  // The connection has its last answer already: this is the parser going on with the bytes after
  // it (the body of a request refused for its framing, a request sent after `connection: close`).
  if (isClosing(socket)) {
    if (!error.code?.startsWith('HPE_')) socket.destroy()
    return
  }
  if (!socket.writable) {
    socket.destroy()
    return
  }
  markClosing(socket)
  const current = (socket as ServerSocket)._httpMessage ?? undefined
  // Whether the error is in the body of the request being answered, rather than in a later one.
  const inItsBody = current?.req !== undefined && !current.req.complete
  if (inItsBody && current.headersSent) {
    // Its answer has begun and is its one answer: the connection ends after it, or is cut if it
    // cannot be finished (the upload it streams is broken).
    if (current.writableEnded) afterAnswersUnderWay(socket, () => closeGently(socket))
    else cutConnection(socket)
    return
  }
  if (current === undefined && inAnsweredBody(socket)) {
    // In the rest of a body Node was dropping after its request's answer: nothing to answer.
    closeGently(socket)
    return
  }
  if (error.code === 'HPE_CLOSED_CONNECTION') {
    // The client asked to close with its last request: the bytes after it are not a request.
    afterAnswersUnderWay(socket, () => closeGently(socket))
    return
  }
  const answer = (): void => {
    const gatewayError = toGatewayError(error.code)
    // The body of a request the kernel admitted: answered as that request, with its id, line and count (SPEC 6).
    if (inItsBody && current !== undefined && answerBrokenBody?.(current, gatewayError) === true) return
    const requestId = randomUUID()
    // With `onAnswered`, the request's access line says the rest (the traffic listener's).
    if (onAnswered === undefined) log.info({ requestId, code: error.code, status: gatewayError.statusCode, error: gatewayError.code }, 'malformed request refused')
    else log.debug({ requestId, code: error.code }, 'malformed request refused')
    const bytesOut = endWithError(socket, gatewayError, requestId)
    onAnswered?.(gatewayError, { requestId, method: undefined, clientAddress: remoteAddressOf(socket), bytesOut })
  }
  // In the body of a request not answered yet, this is its answer. In a later request's head, it
  // follows the answers under way, so that it is neither written into one nor read as theirs.
  if (inItsBody) answer()
  else afterAnswersUnderWay(socket, answer)
}

/** node:http's response in progress on a socket (its `_httpMessage`, as Node's own socketOnError reads it). */
type ServerSocket = Duplex & { _httpMessage?: ServerResponse | null }

/**
 * Calls `then` once every answer on the connection has been written: node:http writes the
 * answers of pipelined requests one after another, each once the one before has finished. An
 * answer that closes the connection, or is cut, ends it first; `then` is not called then.
 */
function afterAnswersUnderWay(socket: Duplex, then: () => void): void {
  const current = (socket as ServerSocket)._httpMessage
  if (current === undefined || current === null) {
    if (socket.writable) then()
    return
  }
  // Node's own 'finish' listener, registered first, has handed the socket to the next answer.
  current.once('finish', () => afterAnswersUnderWay(socket, then))
}

/**
 * CONNECT asks for a tunnel, which only a forward proxy gives (SPEC 2: never an open proxy).
 * Node hands it to the 'connect' event, not to the request listener, and would otherwise drop the socket.
 */
export function answerConnect(log: Logger, socket: Duplex, onAnswered?: (gatewayError: GatewayError, refused: RefusedUnread) => void): void {
  const requestId = randomUUID()
  if (onAnswered === undefined) log.info({ requestId, status: 400, error: 'INVALID_REQUEST' }, 'CONNECT refused')
  const refusal = new GatewayError('INVALID_REQUEST', 'CONNECT is not served: this gateway is not a forward proxy')
  const bytesOut = endWithError(socket, refusal, requestId)
  onAnswered?.(refusal, { requestId, method: 'CONNECT', clientAddress: remoteAddressOf(socket), bytesOut })
}

/** The peer's address, as a request's `clientAddress` (a socket already gone has none). */
function remoteAddressOf(socket: Duplex): string | undefined {
  return (socket as Duplex & { remoteAddress?: string }).remoteAddress
}

/**
 * How long a refused connection may stay half-open after the answer: the client reads it and
 * closes its side; one that does not is cut then (Node sets no timeout on a CONNECT socket, and
 * the listener allows half-open connections, so it would otherwise hold the drain open).
 */
const LINGER_MS = 1_000

/** Writes the error answer and closes; returns the body's length in bytes. */
function endWithError(socket: Duplex, gatewayError: GatewayError, requestId: string): number {
  const body = JSON.stringify(buildErrorBody(gatewayError, requestId, 0))
  const bytes = Buffer.byteLength(body)
  closeGently(
    socket,
    `HTTP/1.1 ${gatewayError.statusCode} ${STATUS_CODES[gatewayError.statusCode] ?? ''}\r\n` +
      `content-type: ${ERROR_CONTENT_TYPE}\r\n` +
      `content-length: ${bytes}\r\n` +
      `x-request-id: ${requestId}\r\n` +
      'connection: close\r\n\r\n' +
      body
  )
  return bytes
}

/** Ends the connection after what was written to it (and `last`), and cuts it once the client had LINGER_MS to read that. */
function closeGently(socket: Duplex, last?: string): void {
  const linger = (): void => {
    // Not at once: a reset could reach the client before it has read the answer.
    const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref()
    socket.once('close', () => clearTimeout(timer))
  }
  if (last === undefined) socket.end(linger)
  else socket.end(last, linger)
}
