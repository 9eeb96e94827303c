import type { IncomingHttpHeaders } from 'node:http'
import type { Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Dispatcher } from 'undici'
import { mapUpstreamError } from '../upstream/map-upstream-error.js'
import { connectionOptions, isHopByHop, stripHopByHop } from './hop-by-hop.js'

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

export type Forward = (request: FastifyRequest, reply: FastifyReply, options: ForwardOptions) => Promise<FastifyReply>

const BODYLESS_METHODS = new Set(['GET', 'HEAD'])

/**
 * Streams requests to an upstream and answers back, both ways without buffering (SPEC 7), on
 * the gateway's shared undici pool. Written on undici's `request()` rather than through
 * @fastify/reply-from, whose per-request URL building, cache-key serialisation and retry
 * wrapping the gateway does not need (it never retries: SPEC 7 passes the upstream's answer
 * through once). The choice and its numbers: docs/performance.md.
 */
export function createForwarder(dispatcher: Dispatcher): Forward {
  return async function forwardStream(request, reply, options) {
    const method = request.method
    const body = BODYLESS_METHODS.has(method) ? null : ((request.body as Readable | undefined) ?? null)
    let upstream: Dispatcher.ResponseData
    try {
      upstream = await dispatcher.request({
        origin: options.origin,
        path: options.query === '' ? options.path : `${options.path}?${options.query}`,
        method: method as Dispatcher.HttpMethod,
        headers: buildUpstreamHeaders(request, options),
        body,
        signal: abortSignalFor(reply),
        headersTimeout: options.timeoutMs,
        bodyTimeout: options.timeoutMs
      })
    } catch (error) {
      throw mapUpstreamError(error)
    }
    reply.code(upstream.statusCode)
    copyResponseHeaders(upstream.headers, reply)
    // An HTTP/1.1 connection whose request body was not read to its end cannot carry another request.
    if (!request.raw.complete) reply.header('connection', 'close')
    return reply.send(upstream.body)
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
  const forwardedFor = incoming['x-forwarded-for']
  const clientAddress = request.socket.remoteAddress ?? 'unknown'
  headers['x-forwarded-for'] = forwardedFor === undefined || forwardedFor === '' ? clientAddress : `${forwardedFor}, ${clientAddress}`
  headers['x-forwarded-proto'] = request.protocol
  if (incoming.host !== undefined) headers['x-forwarded-host'] = incoming.host
  // SPEC 6: the resolved id (the client's when valid, else a new one) goes to every upstream call.
  headers['x-request-id'] = request.id
  if (options.rewriteHeaders !== undefined) headers = options.rewriteHeaders(headers)
  return headers
}

/** The upstream's answer headers, minus hop-by-hop ones (RFC 9110 7.6.1). */
function copyResponseHeaders(headers: IncomingHttpHeaders, reply: FastifyReply): void {
  const listed = connectionOptions(headers.connection)
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined || isHopByHop(name, listed)) continue
    reply.header(name, value)
  }
}

/** Aborts the upstream call when the client goes away before its answer is written. */
export function abortSignalFor(reply: FastifyReply): AbortSignal {
  const controller = new AbortController()
  reply.raw.once('close', function cancelUpstream() {
    if (!reply.raw.writableFinished) controller.abort()
  })
  return controller.signal
}
