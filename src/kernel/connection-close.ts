import type { IncomingMessage, ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import type { Duplex } from 'node:stream'

/**
 * Connections that have their last answer, as an answer with `connection: close` or a framing
 * error's makes it: nothing more is read from them as a request (RFC 9112 9.6, 11.2). Node's
 * parser still goes through the bytes it already has: it hands a request pipelined behind the
 * answer to the listener (which would serve it, though its answer is never written), and reports
 * a framing error in the refused request's own body (`Transfer-Encoding: xchunked`) as a client
 * error, which would be answered a second time. Both look here first.
 */
const closing = new WeakSet<object>()

/** The connection's last answer is written or under way: what its parser finds after it is not served. */
export function markClosing(socket: object | null): void {
  // A request's socket is null once Node has let go of it (a connection already gone).
  if (socket !== null) closing.add(socket)
}

export function isClosing(socket: object): boolean {
  return closing.has(socket)
}

/**
 * Requests answered before their body had arrived whole, by connection: Node reads and drops the
 * rest of such a body on a kept-alive connection, and a framing error in it belongs to a request
 * that has its answer. Only those requests are noted, so the common path writes nothing here.
 */
const answeredBeforeBody = new WeakMap<object, IncomingMessage>()

export function noteAnsweredBeforeBody(request: IncomingMessage): void {
  const socket = request.socket as IncomingMessage['socket'] | null
  if (socket !== null && !socket.destroyed) answeredBeforeBody.set(socket, request)
}

/** Whether the parser of `socket` is still in the body of a request that has its answer. */
export function inAnsweredBody(socket: object): boolean {
  return answeredBeforeBody.get(socket)?.complete === false
}

/**
 * How long a connection stays open after its last answer, at most, while the client still sends
 * the body that answer refused (nginx's lingering close; its `lingering_timeout` is 5 s too).
 */
export const LINGER_AFTER_ANSWER_MS = 5_000

/**
 * The connection of a request answered with `connection: close` before its body arrived whole
 * (a 413, an upstream that failed or answered mid-upload) is not closed the moment its answer is
 * written: the kernel answers bytes that arrive for a closed socket with a reset, and a reset
 * throws away the answer before a client that sends its whole body first has read it (it sees
 * EPIPE or ECONNRESET instead of the 413). The gateway ends its side, reads and drops the rest of
 * the body, and closes once it has arrived, or after LINGER_AFTER_ANSWER_MS.
 *
 * node:http ends such a connection by calling its socket's `destroySoon` (`resOnFinish` in
 * `_http_server.js`, Node 20 to 24); this socket's lingers first. Tests hold every supported Node
 * to it (a client that writes 40 MiB before it reads gets its 413). `connection` is the
 * exchange's: undici lets go of a streamed request's socket.
 */
export function lingerUntilBodyEnds(request: IncomingMessage, connection: Socket): void {
  if (connection.destroyed || request.complete) return
  // Nothing after this answer is served: a request pipelined behind the body is not a request.
  markClosing(connection)
  connection.destroySoon = function lingeringDestroySoon(this: Socket): void {
    // All of the body read, nothing is left for a reset to answer: closed as Node closes it, once
    // the answer is written.
    if (request.complete) return Socket.prototype.destroySoon.call(this)
    this.end()
    // A client that neither sends the rest nor reads is cut, answer written or not.
    const cut = setTimeout(() => this.destroy(), LINGER_AFTER_ANSWER_MS).unref()
    this.once('close', () => clearTimeout(cut))
    // A request undici destroyed (a body of 64 KiB or less it stopped sending, upload-stream.ts)
    // is read no further: Node stops reading the connection for it. The client has the timer's
    // time to read the answer before the close resets what it still sends.
    if (request.destroyed) return
    // Node drops the rest of a body no one read (`req._dump`); one still piped to an upstream
    // call (upload-stream.ts) is taken from it and dropped here too: its answer has gone.
    request.unpipe()
    request.resume()
    request.once('end', () => {
      clearTimeout(cut)
      Socket.prototype.destroySoon.call(this)
    })
  }
}

/**
 * Per connection, the answer it carries whose body ends where the connection does: no length and
 * no chunks (RFC 9112 6.3, rule 8), as Node writes an unknown length to an HTTP/1.0 client
 * (nginx's `proxy_http_version` is 1.0 by default). Such an answer is the connection's last.
 * Only those are noted, so the common path writes nothing here.
 */
const unframedAnswers = new WeakMap<object, ServerResponse>()

/** After `response.writeHead`: notes the answer when its body is delimited by its connection's close. */
export function noteFraming(response: ServerResponse, connection: Socket, hasLength: boolean): void {
  if (!hasLength && !response.chunkedEncoding) unframedAnswers.set(connection, response)
}

/**
 * Ends a connection whose answer is cut short (an upstream broke off, a reader or an upload that
 * stalled, the end of the grace period), so that its client can tell. A length or chunked
 * framing tells it; an answer delimited by the close would read as whole after a FIN, so while
 * one is under way the connection is reset (TCP RST) instead, and the client sees an error
 * rather than a short body it takes for the whole one.
 */
export function cutConnection(connection: Duplex): void {
  const unframed = unframedAnswers.get(connection)
  if (unframed !== undefined && !unframed.writableFinished && connection instanceof Socket) resetConnection(connection)
  else connection.destroy()
}

/**
 * Cuts `response`, an answer under way on `connection` (see `cutConnection`). One still queued
 * behind a pipelined answer (no socket yet) resets nothing: the answer ahead of it goes out whole.
 */
export function cutAnswer(response: ServerResponse, connection: Socket): void {
  if (unframedAnswers.get(connection) === response && response.socket === connection) cutConnection(connection)
  response.destroy()
}

/** Resets a connection rather than closing it; one whose handle cannot be reset (TLS) is destroyed. */
function resetConnection(socket: Socket): void {
  if (socket.destroyed) return
  try {
    socket.resetAndDestroy()
  } catch {
    socket.destroy()
  }
}
