import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import { Transform, type Readable } from 'node:stream'
import { cutAnswer, lingerUntilBodyEnds, noteFraming } from '../kernel/connection-close.js'
import { cutStalledReader, waitsForTurn } from '../kernel/delivery-watch.js'
import type { Exchange } from '../kernel/exchange.js'
import { writeInterim } from '../kernel/interim-answer.js'
import { continueIfExpected, requestBody } from '../kernel/request-body.js'
import { isLongUpload, uploadStream } from '../kernel/upload-stream.js'
import type { UpstreamOutcome } from '../observability/access-record.js'
import { upstreamFailureCause } from '../upstream/map-upstream-error.js'
import type { UpstreamClient } from '../upstream/upstream-client.js'
import { forwardedHeaders } from '../util/forwarded-headers.js'
import { connectionOptions, stripHopByHop } from '../util/hop-by-hop.js'
import { putOwnHeaders } from '../util/own-headers.js'

/** A streamed upstream call, as the planner decided it: the body is the client's, as it arrives. */
export interface StreamCall {
  origin: string
  method: string
  /** The upstream path and query, as they go on the request line. */
  target: string
  headers: Record<string, string | string[] | undefined>
  /** No response headers, or no body progress, for this long is a 504 (SPEC 6). */
  timeoutMs: number
  /** Which upstream it is, for SPEC 17's failure label: the tenant's V4 one unless said (SPEC 14's legacy upstream). */
  upstream?: 'v4' | 'legacy'
}

/**
 * Hears a streamed call's bytes as they pass, without holding them up (SPEC 15: the shadow
 * comparison copies the request and the legacy answer; the client's answer is not delayed).
 */
export interface StreamTap {
  onRequestChunk(chunk: Buffer): void
  /** The request's body has come in whole (not called for one that broke off). */
  onRequestEnd(): void
  onResponseStart(statusCode: number, headers: IncomingHttpHeaders): void
  onResponseChunk(chunk: Buffer): void
}

export type Forward = (exchange: Exchange, call: StreamCall, tap?: StreamTap) => void

/**
 * Streams requests to an upstream and answers back, both ways without buffering (SPEC 7): the
 * upstream's answer is written straight into the client's response as it arrives, the way a
 * hand-written proxy does, with the headers the gateway set for the request (deprecation on
 * legacy proxy routes) merged in.
 * Not @fastify/reply-from: the gateway needs none of its per-request URL building, cache-key
 * serialisation or retry wrapping (it never retries: SPEC 7 passes the upstream's answer
 * through once). The choice and its numbers: docs/performance.md.
 */
export function createForwarder(
  upstream: UpstreamClient,
  /** The gateway's own error answer, for a failure before any upstream header. */
  answerError: (exchange: Exchange, error: unknown) => void,
  isDraining: () => boolean
): Forward {
  return function forwardStream(exchange, call, tap) {
    const { request, response } = exchange
    // The call's outcome goes on the request's access record (SPEC 9), nothing else of it.
    const outcome: UpstreamOutcome = exchange.record
    const sentAt = performance.now()
    // The upstream answer's Connection header: the fields it names are dropped from its trailers too.
    let answerConnection: string | string[] | undefined
    // Connected and writing the request (undici reads its body from here on).
    let sending = false
    const incoming = requestBody(request)
    if (incoming !== null) continueIfExpected(request, response)
    // The body in a stream of its own (upload-stream.ts) when it is copied or long; else the request itself.
    const upload = incoming === null ? null : tap !== undefined ? tapped(incoming, tap) : isLongUpload(incoming) ? uploadStream(incoming) : null
    const body = upload ?? incoming
    // A request without a body has it whole at once (SPEC 15: a session-execute request's sampling is settled then).
    if (incoming === null) tap?.onRequestEnd()
    upstream.stream(
      {
        origin: call.origin,
        method: call.method,
        path: call.target,
        headers: call.headers,
        body,
        timeoutMs: call.timeoutMs,
        tracer: exchange.callTracer
      },
      {
        body: response,
        onBodyBytes(bytes, chunk) {
          outcome.bytesOut += bytes
          tap?.onResponseChunk(chunk)
        },
        onStart(cancel) {
          sending = true
          if (exchange.cancelled) cancel()
          else exchange.cancel = cancel
        },
        waitsForTurn: () => waitsForTurn(exchange),
        onResponseStart(statusCode, headers) {
          // A streamed answer's upstream time ends at its headers (SPEC 9 logs and histograms):
          // the body then flows at the pace of both ends.
          outcome.upstreamMs = performance.now() - sentAt
          answerConnection = headers.connection
          tap?.onResponseStart(statusCode, headers)
          // The upstream's end-to-end headers (RFC 9110 7.6.1) with the gateway's own on top. A 204
          // never carries a Content-Length (RFC 9110 8.6), even when the upstream's did.
          const upstreamHeaders = stripHopByHop(headers, statusCode === 204 ? NOT_IN_NO_CONTENT : undefined) as OutgoingHttpHeaders
          const answer = putOwnHeaders(upstreamHeaders, exchange.answerHeaders)
          // An HTTP/1.1 connection whose request body was not read to its end cannot carry another
          // request; while draining, none should carry another (SPEC 9).
          if (!request.complete || isDraining()) answer.connection = 'close'
          // The rest of the body is read before the connection closes, so that a reset does not take the answer with it.
          if (!request.complete) lingerUntilBodyEnds(request, exchange.connection)
          // Left out with the hop-by-hop fields (a request cannot carry trailers upstream: undici
          // sends none), the upstream's announcement goes back where its trailers can follow.
          if (headers.trailer !== undefined && carriesTrailers(request, statusCode, answer['content-length'] !== undefined)) answer.trailer = headers.trailer
          response.writeHead(statusCode, answer)
          noteFraming(response, exchange.connection, answer['content-length'] !== undefined)
        },
        onTrailers(trailers) {
          // Node would also chunk for an HTTP/1.0 client that asks for it (`TE: chunked`); the
          // answers that carry trailers are the ones that could announce them.
          if (!carriesTrailers(request, response.statusCode, response.hasHeader('content-length'))) return
          try {
            // RFC 9110 7.6.1: a field the answer's Connection header named is the hop's, trailer or not.
            response.addTrailers(stripHopByHop(trailers, new Set(connectionOptions(answerConnection))) as OutgoingHttpHeaders)
          } catch {
            // A field Node refuses to write cannot go on; the body and the other fields have.
          }
        },
        onInformational(statusCode, headers) {
          // RFC 9110 15.2 has a proxy pass interim answers on. Node can write a 103's Link (and
          // answers 100-continue itself); other 1xx are dropped, the final answer still follows.
          // Never to an HTTP/1.0 client, which would read it as the answer (RFC 9110 15).
          const link = headers.link
          if (statusCode !== 103 || link === undefined || response.headersSent || request.httpVersionMinor === 0) return
          writeInterim(response, () => {
            try {
              // Node takes one link per entry: `</a.css>; rel=preload, </b.js>; rel=preload` is two.
              const links = (Array.isArray(link) ? link : [link]).flatMap((value) => value.split(/,\s*(?=<)/))
              response.writeEarlyHints({ link: links })
            } catch {
              // A Link value Node refuses is only a hint: the final answer is what counts.
            }
          })
        },
        onFailure(error) {
          // The time it took to fail (a timeout, a refused connection) is upstream time too.
          outcome.upstreamMs = performance.now() - sentAt
          // An upload the upstream failed midway (its connection made, the body going): undici
          // stops reading the request stream, so the rest of the body is read by no one and the
          // connection cannot carry another request (the client's upload would block until the
          // keep-alive timeout): the answer closes it. One that never connected was not read at
          // all, and Node reads and drops the rest after the answer, as for the gateway's errors.
          if (sending && !request.complete) exchange.answerHeaders.connection = 'close'
          // undici leaves a body it never began to send as it is: let go of it, so that the rest is dropped.
          upload?.destroy()
          answerError(exchange, error)
        },
        onReaderStalled: () => cutStalledReader(exchange),
        onBrokenOff(error) {
          // The client saw the upstream's status and a cut body; the log and metrics say whose
          // failure it was (not 499, a client that left), unless the client did leave first.
          if (exchange.clientGone) return
          outcome.errorCode = error.code
          outcome.brokenOffStatus = error.statusCode
          const cause = upstreamFailureCause(error)
          if (cause !== undefined) outcome.upstreamFailure = { upstream: call.upstream ?? 'v4', cause }
          // SPEC 7: a broken stream reaches the client broken, never as a clean short answer.
          cutAnswer(response, exchange.connection)
        }
      }
    )
  }
}

/** The request body as it goes upstream, each chunk handed to the tap on its way (backpressure kept by pipe). */
function tapped(body: IncomingMessage, tap: StreamTap): Readable {
  const copy = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      tap.onRequestChunk(chunk)
      done(null, chunk)
    },
    flush(done) {
      tap.onRequestEnd()
      done()
    }
  })
  // A request that breaks off fails the copy too, so the upstream call ends as it would have;
  // a copy the call stopped reading lets go of the request, which keeps its connection.
  return uploadStream(body, copy)
}

/**
 * Whether an answer carries trailers: one Node sends chunked, the framing that can (RFC 9112
 * 7.1.2), to an HTTP/1.1 client: a body, no length. Node throws on a `Trailer` field in any other
 * answer. (It also chunks for an HTTP/1.0 client that sends `TE: chunked`, which gets no trailers:
 * the answer could not announce them.)
 */
function carriesTrailers(request: IncomingMessage, statusCode: number, hasLength: boolean): boolean {
  return (
    request.httpVersionMajor === 1 &&
    request.httpVersionMinor >= 1 &&
    request.method !== 'HEAD' &&
    statusCode !== 204 &&
    statusCode !== 304 &&
    !hasLength
  )
}

const NOT_IN_NO_CONTENT: ReadonlySet<string> = new Set(['content-length'])

/**
 * `Host`: the upstream's own is set by undici; the client's travels as `x-forwarded-host`.
 * `Expect`: Node answers `Expect: 100-continue` itself, and undici refuses to send the header.
 */
const NOT_FORWARDED: ReadonlySet<string> = new Set(['host', 'expect'])

/**
 * End-to-end request headers as they came (SPEC 7), minus hop-by-hop ones and NOT_FORWARDED, with
 * `x-forwarded-*` and the request id: the headers the planner gives a streamed call.
 */
export function passthroughHeaders(
  incoming: IncomingHttpHeaders,
  rawHeaders: readonly string[],
  clientAddress: string | undefined,
  protocol: string,
  requestId: string
): Record<string, string | string[] | undefined> {
  const headers: Record<string, string | string[] | undefined> = stripHopByHop(incoming, NOT_FORWARDED)
  if (hasRepeatedFields(incoming, rawHeaders)) restoreCopiesNodeDropped(headers, rawHeaders)
  Object.assign(headers, forwardedHeaders(incoming, clientAddress, protocol))
  // SPEC 7: x-forwarded-host is the incoming Host; without one (HTTP/1.0) the client's own claim is not passed on as the gateway's.
  if (incoming.host === undefined) headers['x-forwarded-host'] = undefined
  // SPEC 6: the resolved id (the client's when valid, else a new one) goes to every upstream call.
  headers['x-request-id'] = requestId
  return headers
}

/**
 * Fields Node's parser keeps once, dropping every later copy (node:_http_incoming's list; it joins
 * any other field's copies with `, `). SPEC 7 forwards end-to-end headers as they came, so a
 * field sent twice goes on twice: the upstream, not the gateway, judges two `Authorization`
 * lines. `content-length` is left as Node reads it (copies that differ never reach a handler).
 */
const KEPT_ONCE_BY_NODE: ReadonlySet<string> = new Set(['age', 'authorization', 'content-type', 'etag', 'expires', 'from', 'if-modified-since', 'if-unmodified-since', 'last-modified', 'location', 'max-forwards', 'proxy-authorization', 'referer', 'retry-after', 'server', 'user-agent'])

/** Whether any field came more than once: Node then has fewer names than the request had lines. */
function hasRepeatedFields(incoming: IncomingHttpHeaders, rawHeaders: readonly string[]): boolean {
  let names = 0
  for (const _name in incoming) names++
  return names * 2 !== rawHeaders.length
}

/** Every copy, in order, of a field Node kept once and the copy forwards (rare: only a request that repeats one). */
function restoreCopiesNodeDropped(headers: Record<string, string | string[] | undefined>, rawHeaders: readonly string[]): void {
  const copies = new Map<string, string[]>()
  for (let index = 0; index < rawHeaders.length; index += 2) {
    const name = (rawHeaders[index] as string).toLowerCase()
    if (!KEPT_ONCE_BY_NODE.has(name) || headers[name] === undefined) continue
    const values = copies.get(name)
    if (values === undefined) copies.set(name, [rawHeaders[index + 1] as string])
    else values.push(rawHeaders[index + 1] as string)
  }
  for (const [name, values] of copies) if (values.length > 1) headers[name] = values
}
