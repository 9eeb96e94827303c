import type { IncomingMessage } from 'node:http'

/**
 * The request's body stream, or null when it has none: GET and HEAD bodies are never read, and
 * a request with neither `Transfer-Encoding` nor a non-zero `Content-Length` has no body
 * (RFC 9112 6.3), so none is sent on. The body itself is never buffered here (SPEC 7).
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
