import type { IncomingMessage } from 'node:http'

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
