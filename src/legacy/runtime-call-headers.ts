import type { IncomingHttpHeaders } from 'node:http'
import { forwardedHeaders } from '../util/forwarded-headers.js'

/**
 * Headers of every V4 call made for a legacy runtime request: one credential, and nothing else
 * of the client's but its agent and its trace context. Also what `explain` shows.
 *
 * SPEC 17: `traceparent` and `tracestate` go on unchanged, valid or not (the gateway forwards
 * the trace and takes no part in it, docs/decisions.md), and `baggage` only with
 * `tracing.forwardBaggage` (client baggage is untrusted).
 */
export function runtimeCallHeaders(
  incoming: IncomingHttpHeaders,
  clientAddress: string | undefined,
  protocol: string,
  requestId: string,
  authorization: string,
  forwardBaggage: boolean
): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json',
    // The gateway reads these answers, so it asks for them uncompressed.
    'accept-encoding': 'identity',
    authorization,
    'x-request-id': requestId,
    ...forwardedHeaders(incoming, clientAddress, protocol)
  }
  const userAgent = incoming['user-agent']
  if (userAgent !== undefined) headers['user-agent'] = userAgent
  copyHeader(incoming, headers, 'traceparent')
  copyHeader(incoming, headers, 'tracestate')
  if (forwardBaggage) copyHeader(incoming, headers, 'baggage')
  return headers
}

/** A header as Node joined it (several field lines as one, comma-separated: RFC 9110 5.3), as native traffic passes it. */
function copyHeader(incoming: IncomingHttpHeaders, headers: Record<string, string>, name: string): void {
  const value = incoming[name]
  if (value === undefined) return
  headers[name] = typeof value === 'string' ? value : value.join(', ')
}
