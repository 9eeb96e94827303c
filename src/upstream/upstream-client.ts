import type { IncomingHttpHeaders } from 'node:http'
import type { Readable, Writable } from 'node:stream'
import { Agent, type Dispatcher } from 'undici'
import { GatewayError } from '../errors/registry.js'
import { watchBacklog } from '../util/backlog-watch.js'
import { cutAtShutdownError, mapUpstreamError, mapUpstreamErrorAfterHeaders } from './map-upstream-error.js'
import { connectorSkippingUnaskedContinue } from './skip-unasked-continue.js'

/** Answers the gateway must read (sessions.start, executions) are capped: a V4 answer is small. */
export const MAX_UPSTREAM_BODY_BYTES = 16 * 1024 * 1024

export interface UpstreamRequest {
  origin: string
  method: string
  /** Path and query. */
  path: string
  headers: Record<string, string | string[] | undefined>
  body: string | Buffer | Readable | null
  /** Per request, so a reload can change it: no headers or body progress for this long is a timeout. */
  timeoutMs: number
  /** Lets the caller cancel the call while it is under way (buffered calls). */
  cancelScope?: CancelScope
  /** Where the call's time on the upstream is added once it settles, answered or failed (buffered calls). */
  timing?: UpstreamTiming
  /** SPEC 17: the request's trace while tracing is on; the call then carries a `traceparent` of its own. */
  tracer?: CallTracer | undefined
  /** A buffered answer larger than this fails with AnswerTooLargeError (default MAX_UPSTREAM_BODY_BYTES). */
  maxBodyBytes?: number
  /**
   * Heard once the call goes out (buffered calls): its connection is made (TLS included) and
   * undici writes it next. A call that failed before (refused, unreachable, a name not resolved,
   * a certificate refused, not connected in time, not sent at shutdown) never reached the upstream.
   */
  onSent?: (() => void) | undefined
}

/** A buffered answer over its call's `maxBodyBytes`: a bad upstream answer (SPEC 6), which SPEC 15's comparisons skip. */
export class AnswerTooLargeError extends GatewayError {
  constructor(limit: number) {
    super('UPSTREAM_BAD_RESPONSE', `the upstream answer is larger than ${limit} bytes`)
  }
}

/**
 * SPEC 17: what traces a request's upstream calls (tracing/ implements it). The client asks it for
 * each call's CLIENT span as the call goes, writes that span's `traceparent` into the call's
 * headers, and tells the span how the call went. The client does it, rather than a wrapper around
 * it per request, so that a traced request, sampled or not, takes the same runner, client and
 * handlers as any other and makes no objects of its own beyond its spans (docs/decisions.md).
 */
export interface CallTracer {
  traceCall(request: UpstreamRequest, streamed: boolean): TracedCall
}

/** One upstream call's CLIENT span, as the client reports to it. */
export interface TracedCall {
  /** W3C Trace Context 3.2: the header the call carries, naming this span, sampled or not. */
  readonly traceparent: string
  /** The final answer's status and headers arrived. */
  answered(statusCode: number): void
  /** The call failed, before or after its headers: `errorCode` is the gateway's, never the error's message. */
  failed(errorCode: string, endedAt: number): void
  /** A buffered call's answer has been read. (A streamed call's span ends with its request's.) */
  end(endedAt: number): void
}

/** The time a request spent on upstream calls, for its log line and histogram (SPEC 9). */
export interface UpstreamTiming {
  upstreamMs: number | undefined
}

/**
 * The reason a call the gateway ended itself is aborted with: its client left or stopped
 * reading, or a comparison's time ran out (SPEC 15). No failure of the upstream's: its CLIENT
 * span says `cancelled`, not an upstream error code (SPEC 17 `error.type`).
 */
class CancelledByGateway extends Error {
  constructor() {
    super('the gateway cancelled the call')
  }
}

/** SPEC 17: the CLIENT span's `error.type` of a call the gateway cancelled (a low-cardinality identifier, as semantic conventions ask). */
export const CANCELLED_CALL_TYPE = 'cancelled'

/** The span's `error.type` for a call that ended with `error`, mapped to `failure` for its answer. */
function failureType(error: Error, failure: GatewayError): string {
  return error instanceof CancelledByGateway ? CANCELLED_CALL_TYPE : failure.code
}

/**
 * Cancels whichever upstream call of a request is under way, e.g. when its client goes away.
 * Cheaper than an AbortController per request, and it also covers calls not yet started.
 */
export interface CancelScope {
  cancelled: boolean
  cancel: (() => void) | undefined
}

export interface UpstreamResponse {
  statusCode: number
  headers: IncomingHttpHeaders
  body: Buffer
}

/** Where a streamed answer goes; the client calls `onResponseStart` once, before any byte of body. */
export interface StreamTarget {
  /** Called with a function that cancels the call, e.g. when the downstream client goes away. */
  onStart(cancel: () => void): void
  /** The final answer's status and headers; interim (1xx) answers go to onInformational. */
  onResponseStart(statusCode: number, headers: IncomingHttpHeaders): void
  /** An interim 1xx answer before the final one (RFC 9110 15.2), e.g. 103 Early Hints. */
  onInformational(statusCode: number, headers: IncomingHttpHeaders): void
  /** The body goes here, with backpressure; it is ended, or destroyed when the upstream breaks off. */
  readonly body: Writable
  /** Each chunk as it goes into `body`, and its length. */
  onBodyBytes(bytes: number, chunk: Buffer): void
  /** The trailer fields of a chunked answer, when the upstream sent any: right before the body ends. */
  onTrailers(trailers: IncomingHttpHeaders): void
  /** A failure before any response header: the target answers it itself. */
  onFailure(error: GatewayError): void
  /** A failure after the headers went on: the body is then cut, and this says why. */
  onBrokenOff(error: GatewayError): void
  /**
   * `body` took none of what it holds for the call's `timeoutMs` (SPEC 10: a client that stopped
   * reading holds its in-flight slot and this upstream connection); the target cuts it.
   */
  onReaderStalled(): void
  /**
   * Whether `body` is an answer queued behind a pipelined one on a connection still open: its
   * backlog cannot shrink before its turn, whatever its reader does, so it is not stalled.
   */
  waitsForTurn?(): boolean
}

export interface UpstreamClient {
  /** Sends a request and reads the whole answer. Fails only with a GatewayError. */
  request(request: UpstreamRequest): Promise<UpstreamResponse>
  /** Streams a request's answer into `target`, both ways without buffering (SPEC 7). */
  stream(request: UpstreamRequest, target: StreamTarget): void
  /** Waits for the calls under way, then closes the pool. */
  close(): Promise<void>
  /** Fails every call still under way and closes the pool: the end of a shutdown's grace period. */
  destroy(): Promise<void>
}

export interface UpstreamClientOptions {
  connectTimeoutMs: number
}

/**
 * The gateway's one connection pool and its two ways of calling an upstream. Both are written
 * on undici's `dispatch()` handler API, the lowest-cost one: no intermediate Readable, and the
 * response body goes straight to its destination.
 */
export function createUpstreamClient(options: UpstreamClientOptions): UpstreamClient {
  const agent = new Agent({
    connect: connectorSkippingUnaskedContinue({ timeout: options.connectTimeoutMs }),
    keepAliveTimeout: 4_000,
    // One request at a time on a connection (undici's default), which the connector relies on.
    // No `connections` cap: a capped pool queues a call's options and reads its headers later,
    // and tracing writes the next call's traceparent into the same headers (traceCall below).
    pipelining: 1
  })

  function dispatchOptions(request: UpstreamRequest): Dispatcher.DispatchOptions {
    return {
      origin: request.origin,
      method: request.method as Dispatcher.HttpMethod,
      path: request.path,
      headers: request.headers as Record<string, string | string[]>,
      body: request.body,
      headersTimeout: request.timeoutMs,
      bodyTimeout: request.timeoutMs
    }
  }

  return {
    request(request) {
      const call = traceCall(request, false)
      return new Promise((resolve, reject) => {
        agent.dispatch(dispatchOptions(request), new BufferingHandler(resolve, reject, request.method === 'HEAD', request.cancelScope, request.timing, call, request.maxBodyBytes ?? MAX_UPSTREAM_BODY_BYTES, request.onSent))
      })
    },
    stream(request, target) {
      const call = traceCall(request, true)
      agent.dispatch(dispatchOptions(request), new StreamingHandler(target, request.method === 'HEAD', call, request.timeoutMs))
    },
    close: () => agent.close(),
    destroy: () => agent.destroy(cutAtShutdownError())
  }
}

/**
 * The call's span, its `traceparent` written into the call's own headers object rather than a
 * copy (a copy of the request and its headers per call cost 16 % of a traced legacy request's
 * CPU). Safe because that object belongs to one request (built per request by the planner), its
 * calls go one after another, and undici serialises a request's headers when it is dispatched:
 * the pool has no connection cap, so it never queues a call's options to read later (a contract
 * test holds undici to that: test/integration/upstream-headers-at-dispatch.test.ts).
 */
function traceCall(request: UpstreamRequest, streamed: boolean): TracedCall | undefined {
  const tracer = request.tracer
  if (tracer === undefined) return undefined
  const call = tracer.traceCall(request, streamed)
  request.headers.traceparent = call.traceparent
  return call
}

/** Reads a whole answer, at most `maxBytes`. */
class BufferingHandler implements Dispatcher.DispatchHandler {
  private readonly startedAt = performance.now()
  private statusCode = 0
  private headers: IncomingHttpHeaders = {}
  private readonly chunks: Buffer[] = []
  private bytes = 0
  private settled = false

  constructor(
    private readonly resolve: (response: UpstreamResponse) => void,
    private readonly reject: (error: GatewayError) => void,
    private readonly toHead: boolean,
    private readonly cancelScope: CancelScope | undefined,
    private readonly timing: UpstreamTiming | undefined,
    private readonly call: TracedCall | undefined,
    private readonly maxBytes: number,
    private readonly onSent: (() => void) | undefined
  ) {}

  // undici calls it on a connected socket, right before it writes the request (client-h1.js
  // `writeH1`); a call aborted here is not written.
  onRequestStart(controller: Dispatcher.DispatchController): void {
    const scope = this.cancelScope
    if (scope !== undefined) {
      const cancel = (): void => controller.abort(new CancelledByGateway())
      if (scope.cancelled) return cancel()
      scope.cancel = cancel
    }
    this.onSent?.()
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // An interim (1xx) answer is not the answer: the gateway reads the final one.
    if (statusCode < 200 && statusCode >= 100) return
    const bodyless = endsAtHeaders(statusCode, this.toHead)
    const unreadable = unreadableAnswer(statusCode, headers, bodyless)
    if (unreadable !== undefined) {
      this.fail(unreadable)
      controller.abort(unreadable)
      return
    }
    this.statusCode = statusCode
    this.headers = headers
    // Whatever its Content-Length says; undici then reports a length mismatch, which is no failure.
    if (bodyless) this.onResponseEnd()
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.bytes += chunk.length
    if (this.bytes > this.maxBytes) {
      this.fail(new AnswerTooLargeError(this.maxBytes))
      controller.abort(new Error('answer too large'))
      return
    }
    this.chunks.push(chunk)
  }

  onResponseEnd(): void {
    if (this.settled) return
    this.settled = true
    const endedAt = this.addTime()
    const body = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.bytes)
    const call = this.call
    if (call !== undefined) {
      call.answered(this.statusCode)
      call.end(endedAt)
    }
    this.resolve({ statusCode: this.statusCode, headers: this.headers, body })
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    const failure = this.statusCode === 0 ? mapUpstreamError(error) : mapUpstreamErrorAfterHeaders(error)
    this.fail(failure, failureType(error, failure))
  }

  private fail(error: GatewayError, spanType: string = error.code): void {
    if (this.settled) return
    this.settled = true
    const endedAt = this.addTime()
    this.call?.failed(spanType, endedAt)
    this.reject(error)
  }

  /** Adds the call's time to the request's; returns when the call ended. */
  private addTime(): number {
    const endedAt = performance.now()
    const timing = this.timing
    if (timing !== undefined) timing.upstreamMs = (timing.upstreamMs ?? 0) + (endedAt - this.startedAt)
    return endedAt
  }
}

/** Writes an answer into a target as it arrives, pausing the upstream while the target is full. */
class StreamingHandler implements Dispatcher.DispatchHandler {
  private started = false
  private ended = false
  /** Set while `target.body` is behind (the upstream paused for it, or its last bytes wait): ends the look at its reader's pace. */
  private stopWatch: (() => void) | undefined = undefined

  constructor(
    private readonly target: StreamTarget,
    private readonly toHead: boolean,
    private readonly call: TracedCall | undefined,
    /** How long `target.body` may take none of the answer before it is cut (the upstream's own idle limit). */
    private readonly stallMs: number
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.target.onStart(() => controller.abort(new CancelledByGateway()))
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    // undici reports interim answers here too; the final one follows on the same request.
    if (statusCode < 200 && statusCode >= 100) return this.target.onInformational(statusCode, headers)
    const bodyless = endsAtHeaders(statusCode, this.toHead)
    const unreadable = unreadableAnswer(statusCode, headers, bodyless)
    // Nothing went to the client yet: onResponseError gets this error and the client a 502.
    if (unreadable !== undefined) return controller.abort(unreadable)
    this.started = true
    this.call?.answered(statusCode)
    this.target.onResponseStart(statusCode, headers)
    if (bodyless) this.end()
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.target.onBodyBytes(chunk.length, chunk)
    if (this.target.body.write(chunk)) return
    controller.pause()
    // undici runs no body timeout while paused: the reader's pace is looked at here, only while it
    // is behind, so an answer that flows costs no timer.
    const body = this.target.body
    const drained = (): void => {
      this.stopStallCheck()
      controller.resume()
    }
    this.stopWatch = watchBacklog(body, this.stallMs, () => {
      this.stopWatch = undefined
      body.off('drain', drained)
      this.target.onReaderStalled()
    }, () => this.target.waitsForTurn?.() === true)
    body.once('drain', drained)
  }

  onResponseEnd(_controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    if (this.ended) return
    if (hasAnyField(trailers)) this.target.onTrailers(trailers)
    this.end()
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    // Before headers the client still gets an answer (SPEC 6); after, only an aborted stream can say it.
    if (!this.started) {
      const failure = mapUpstreamError(error)
      this.call?.failed(failureType(error, failure), performance.now())
      return this.target.onFailure(failure)
    }
    // An answer that ended at its headers is whole: what undici says after (a 304's Content-Length
    // that no body follows is a length mismatch to it) cuts nothing.
    this.stopStallCheck()
    if (this.ended) return
    const failure = mapUpstreamErrorAfterHeaders(error)
    this.call?.failed(failureType(error, failure), performance.now())
    this.target.onBrokenOff(failure)
    this.target.body.destroy(error)
  }

  private end(): void {
    this.ended = true
    this.stopStallCheck()
    const body = this.target.body
    body.end()
    // The last of the answer may still wait for a reader that took none of it (Node emits no
    // 'finish' then, and the in-flight slot would stay taken): looked at as while paused, only
    // when bytes wait, until it is taken or the response closes.
    if (body.writableLength === 0 || body.writableFinished) return
    this.stopWatch = watchBacklog(body, this.stallMs, () => {
      this.stopWatch = undefined
      this.target.onReaderStalled()
    }, () => this.target.waitsForTurn?.() === true)
    body.once('close', () => this.stopStallCheck())
  }

  private stopStallCheck(): void {
    this.stopWatch?.()
    this.stopWatch = undefined
  }
}

/**
 * RFC 9112 6.3: an answer to HEAD, a 204 and a 304 end at their headers, whatever their
 * Content-Length or Transfer-Encoding says (a 304's Content-Length is the 200's, RFC 9110 8.6).
 */
function endsAtHeaders(statusCode: number, toHead: boolean): boolean {
  return toHead || statusCode === 204 || statusCode === 304
}

/**
 * Why a final answer's head cannot be passed on (SPEC 6 UPSTREAM_BAD_RESPONSE), or undefined:
 * two comparisons for the common answer.
 * - A status outside 100-599 (RFC 9110 15): it has no class a client could fall back on.
 * - A transfer coding other than chunked (RFC 9112 6.1): undici decodes only chunked, and reads
 *   any other coding's bytes up to the close as if they were content. `Transfer-Encoding` is
 *   hop-by-hop, so passed on, the coded bytes would reach the client as the content itself.
 */
function unreadableAnswer(statusCode: number, headers: IncomingHttpHeaders, bodyless: boolean): GatewayError | undefined {
  if (statusCode > 599 || statusCode < 100) {
    return new GatewayError('UPSTREAM_BAD_RESPONSE', `the upstream answered with ${statusCode}, which is not a valid HTTP status`)
  }
  // A string[] when the field came more than once.
  const coding: string | string[] | undefined = headers['transfer-encoding']
  if (coding === undefined || coding === 'chunked' || bodyless || isChunkedOnly(coding)) return undefined
  return new GatewayError('UPSTREAM_BAD_RESPONSE', 'the upstream answer uses a transfer coding the gateway cannot decode')
}

function isChunkedOnly(coding: string | string[]): boolean {
  return typeof coding === 'string' && coding.trim().toLowerCase() === 'chunked'
}

/** Whether a parsed field block holds any field; undici passes `{}` for an answer without trailers. */
function hasAnyField(fields: IncomingHttpHeaders): boolean {
  for (const _name in fields) return true
  return false
}
