import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http'
import type { Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { writeGatewayError } from '../errors/error-handler.js'
import type { UpstreamClient } from '../upstream/upstream-client.js'
import { forwardedHeaders } from '../util/forwarded-headers.js'
import { connectionOptions, isHopByHop, stripHopByHop } from '../util/hop-by-hop.js'
import { appendLink } from '../util/link-header.js'

export interface ForwardOptions {
  origin: string
  /** The upstream path, without query. */
  path: string
  /** The upstream query without "?"; "" for none. */
  query: string
  /** No response headers, or no body progress, for this long is a 504 (SPEC 6). */
  timeoutMs: number
  /** Called on the request headers after hop-by-hop removal and `x-forwarded-*`. */
  rewriteHeaders?: (headers: Record<string, string | string[] | undefined>) => Record<string, string | string[] | undefined>
}

export type Forward = (request: FastifyRequest, reply: FastifyReply, options: ForwardOptions) => FastifyReply

const BODYLESS_METHODS = new Set(['GET', 'HEAD'])

/**
 * Streams requests to an upstream and answers back, both ways without buffering (SPEC 7). The
 * reply is taken over from fastify (`hijack`) and the upstream's answer is written straight
 * into the socket's response as it arrives, the way a hand-written proxy does; headers the
 * handler set before (request id, deprecation on legacy proxy routes) are merged in.
 * Not @fastify/reply-from: the gateway needs none of its per-request URL building, cache-key
 * serialisation or retry wrapping (it never retries: SPEC 7 passes the upstream's answer
 * through once). The choice and its numbers: docs/performance.md.
 */
export function createForwarder(upstream: UpstreamClient): Forward {
  return function forwardStream(request, reply, options) {
    // Before hijack: a credential the rewrite refuses still leaves through the error handler.
    const headers = buildUpstreamHeaders(request, options)
    const res = reply.raw
    const ownHeaders = reply.getHeaders() as OutgoingHttpHeaders
    reply.hijack()
    const traffic = request.traffic
    const body = BODYLESS_METHODS.has(request.method) ? null : ((request.body as Readable | undefined) ?? null)
    upstream.stream(
      {
        origin: options.origin,
        method: request.method,
        path: options.query === '' ? options.path : `${options.path}?${options.query}`,
        headers,
        body,
        timeoutMs: options.timeoutMs
      },
      {
        body: res,
        onStart(cancel) {
          if (traffic.cancelled) cancel()
          else traffic.cancel = cancel
        },
        onResponseStart(statusCode, headers) {
          const answer = responseHeaders(headers, ownHeaders)
          // An HTTP/1.1 connection whose request body was not read to its end cannot carry another request.
          if (!request.raw.complete) answer.connection = 'close'
          res.writeHead(statusCode, answer)
        },
        onFailure(error) {
          writeGatewayError(request, res, error, ownHeaders)
        }
      }
    )
    return reply
  }
}

/**
 * End-to-end request headers as they came (SPEC 7), minus hop-by-hop ones and `Host` (the
 * upstream's own is set by undici; the client's travels as `x-forwarded-host`).
 */
function buildUpstreamHeaders(request: FastifyRequest, options: ForwardOptions): Record<string, string | string[] | undefined> {
  const incoming = request.headers
  let headers: Record<string, string | string[] | undefined> = stripHopByHop(incoming)
  delete headers.host
  // Node answers `Expect: 100-continue` itself; undici refuses to send the header.
  delete headers.expect
  Object.assign(headers, forwardedHeaders(incoming, request.socket.remoteAddress, request.protocol))
  // SPEC 6: the resolved id (the client's when valid, else a new one) goes to every upstream call.
  headers['x-request-id'] = request.id
  if (options.rewriteHeaders !== undefined) headers = options.rewriteHeaders(headers)
  return headers
}

/**
 * The upstream's answer headers minus hop-by-hop ones (RFC 9110 7.6.1), with the gateway's
 * own on top; a `Link` of both is kept whole (the upstream's, then the deprecation link).
 */
function responseHeaders(upstream: IncomingHttpHeaders, own: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const listed = connectionOptions(upstream.connection)
  const headers: OutgoingHttpHeaders = {}
  for (const name in upstream) {
    const value = upstream[name]
    if (value !== undefined && !isHopByHop(name, listed)) headers[name] = value
  }
  for (const name in own) {
    const value = own[name]
    if (value === undefined) continue
    headers[name] = name === 'link' ? appendLink(headers.link, String(value)) : value
  }
  return headers
}
