import type { IncomingMessage } from 'node:http'

/**
 * The request's body stream, or null when it has none to send on, by fastify's rule (kept when
 * the listener left fastify): GET and HEAD bodies are never read; a request with no
 * `Transfer-Encoding`, no `Content-Type` and no non-zero `Content-Length` has no body (RFC 9112
 * 6.3). With a `Content-Type` the (possibly empty) stream is sent on. Never buffered (SPEC 7).
 */
export function requestBody(request: IncomingMessage): IncomingMessage | null {
  const method = request.method
  if (method === 'GET' || method === 'HEAD') return null
  const headers = request.headers
  if (headers['transfer-encoding'] === undefined && headers['content-type'] === undefined) {
    const length = headers['content-length']
    if (length === undefined || length === '0') return null
  }
  return request
}
