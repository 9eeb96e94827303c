import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import { writeInterim } from './interim-answer.js'

/**
 * Whether a request has a body to send on, by fastify's rule (kept when the listener left
 * fastify): GET and HEAD bodies are never read; a request with no `Transfer-Encoding`, no
 * `Content-Type` and no non-zero `Content-Length` has no body (RFC 9112 6.3). With a
 * `Content-Type` the (possibly empty) body is sent on. `explain` asks the same question.
 */
export function hasBody(method: string, headers: IncomingHttpHeaders): boolean {
  if (method === 'GET' || method === 'HEAD') return false
  if (headers['transfer-encoding'] === undefined && headers['content-type'] === undefined) {
    const length = headers['content-length']
    if (length === undefined || length === '0') return false
  }
  return true
}

/** The request's body stream, or null when it has none to send on (`hasBody`). Never buffered (SPEC 7). */
export function requestBody(request: IncomingMessage): IncomingMessage | null {
  return hasBody(request.method as string, request.headers) ? request : null
}

const CONTINUE_EXPECTED = /(?:^|[\s,])100-continue(?:$|[\s,;])/i

/**
 * The `100 Continue` an `Expect: 100-continue` request waits for, sent once the gateway is about
 * to read its body (RFC 9110 10.1.1). The traffic listener does not send it by itself
 * (traffic-server.ts), so a request refused first (credentials, media type, a declared length
 * over the limit, load shedding) is answered before the client uploads anything.
 */
export function continueIfExpected(request: IncomingMessage, response: ServerResponse): void {
  const expect = request.headers.expect
  if (expect === undefined || response.headersSent || request.httpVersionMajor !== 1 || request.httpVersionMinor !== 1) return
  if (CONTINUE_EXPECTED.test(expect)) writeInterim(response, () => response.writeContinue())
}
