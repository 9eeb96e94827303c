import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import { GatewayError } from '../errors/registry.js'
import { createBodyStallWatch } from './body-stall.js'
import { isClosing, noteAnsweredBeforeBody } from './connection-close.js'
import { Exchange } from './exchange.js'
import { refuseHead } from './head-checks.js'
import { createEventLoopMonitor, createInFlightLimiter, overloadedError, RETRY_AFTER_SECONDS } from './load-shedding.js'
import { requestBody } from './request-body.js'
import { writeGatewayError } from './write-error.js'

export interface KernelDeps {
  logger: Logger
  /** Read per request, so that a reload applies to the next one. */
  limits: () => { maxInFlight: number; upstreamTimeoutMs: number }
  /** Set once: the event-loop sampler is built at start (a restart-only key). */
  maxEventLoopDelayMs: number
  /** While draining, requests that still arrive (on kept-alive connections) get 503 SHUTTING_DOWN. */
  isDraining: () => boolean
  /** Serves a request the kernel admitted; what it throws is answered as the gateway's error. */
  serve: (exchange: Exchange) => void
  /**
   * Answers a request the kernel does not admit (draining, shedding) with `error`, as the planner
   * refuses it: on a legacy route with the route's headers (SPEC 13, 14), named on its log line.
   */
  refuse: (exchange: Exchange, error: GatewayError) => void
  /** Hears every request's end, answered or aborted, with the status its line reports. */
  onFinished: (exchange: Exchange, statusCode: number) => void
}

export interface TrafficKernel {
  /** node:http's request listener for the traffic listener. */
  handle(request: IncomingMessage, response: ServerResponse): void
  /** The gateway's own error answer; while draining it closes its connection (SPEC 9). */
  answerError(exchange: Exchange, error: unknown): void
  /**
   * Answers `error` (Node's parser refused the body: malformed chunks, its request timeout) to the
   * request `response` belongs to, if it is one whose body was still arriving and unanswered: as
   * that request's one answer, with its request id, access line and count (SPEC 6). False when
   * there is none, and the caller answers on the socket itself.
   */
  answerBrokenBody(response: object, error: GatewayError): boolean
  /** Starts the event-loop sampler (SPEC 10), once the listener listens. */
  startSampling(): void
  /** Stops the event-loop sampler and the body-stall sweep. */
  stop(): void
  /**
   * SPEC 17's v4gw_requests_in_flight: the requests SPEC 10 counts against `limits.maxInFlight`
   * now, so that shedding starts where the gauge meets the limit. A keyed call whose client left
   * is still one (SPEC 16: its calls go on), and so is a session-execute whose shared
   * `sessions.start` goes on (`Exchange.callsUnderWay`); a request refused before admission is not.
   */
  inFlight(): number
  /**
   * Resolves once every request has ended, its access line and metrics written. A cut
   * connection's response closes a turn or two after the server's own close: without this wait
   * the process exited first, and the requests cut at the end of a grace period left no line.
   */
  settled(): Promise<void>
}

/** Logged for a client that went away before its answer was written (nginx's convention). */
const CLIENT_CLOSED_REQUEST = 499

/**
 * The node:http side of the traffic listener: it admits a request (draining, its head, load
 * shedding, SPEC 10), owns its lifecycle (the in-flight slot, the body-stall watch, cancelling
 * an upstream call under way, the end) and answers the gateway's own errors. What a request
 * becomes is not its business: `serve` plans and runs it (traffic/).
 */
export function createTrafficKernel(deps: KernelDeps): TrafficKernel {
  const log = deps.logger
  const inFlight = createInFlightLimiter(() => deps.limits().maxInFlight)
  const eventLoop = createEventLoopMonitor(deps.maxEventLoopDelayMs)
  // A client body that makes no progress for the upstream limit is cut as the upstream's would be.
  const bodyStalls = createBodyStallWatch(() => deps.limits().upstreamTimeoutMs, answerStalledBody)

  let open = 0
  let whenSettled: (() => void)[] = []

  /** A request's end: its in-flight slot freed, its end reported (access line, metrics, span), the drain told. */
  function end(exchange: Exchange, entered: boolean, statusCode: number): void {
    if (entered) inFlight.leave()
    deps.onFinished(exchange, statusCode)
    if (--open === 0 && whenSettled.length > 0) {
      for (const resolve of whenSettled) resolve()
      whenSettled = []
    }
  }

  function handle(request: IncomingMessage, response: ServerResponse): void {
    // Read after an answer that closes the connection (RFC 9112 9.6): never served, and its
    // answer could never be written. Node closes the connection once that answer has gone.
    if (isClosing(request.socket)) return
    const exchange = new Exchange(request, response)
    let entered = false
    let finished = false
    open++
    // One function ends every request, answered or aborted: it frees the in-flight slot, cancels
    // an upstream call still under way, and reports the end. The response's 'close' calls it, or
    // the connection's for an answer queued behind a pipelined one (it has no socket yet, and
    // Node never closes it).
    // `on`, not `once`: 'close' comes once, `finished` guards anyway, and `once` wraps and unhooks per request.
    response.on('close', finish)
    const queuedOn = response.socket === null ? unfinishedOn(request.socket) : undefined
    queuedOn?.add(finish)
    function finish(): void {
      if (finished) return
      finished = true
      queuedOn?.delete(finish)
      bodyStalls.unwatch(exchange)
      const aborted = !response.writableFinished
      // A keyed request's calls outlive a client that left (SPEC 16): they hold its slot until they
      // end (SPEC 10), and its end is reported then, with what they came to (SPEC 17: its outcome, a failed call).
      const outliving = aborted ? exchange.outlivesClient : undefined
      if (aborted) {
        exchange.cancelled = true
        exchange.cancel?.()
      } else if (!request.complete) noteAnsweredBeforeBody(request)
      const statusCode = aborted ? (exchange.record.brokenOffStatus ?? CLIENT_CLOSED_REQUEST) : response.statusCode
      const underWay = aborted && entered ? exchange.callsUnderWay : undefined
      if (outliving !== undefined) {
        const endLater = (): void => end(exchange, entered, statusCode)
        outliving.then(endLater, endLater)
      } else if (underWay !== undefined) {
        // Ended now (its line, its counts), its slot freed once its calls have ended (SPEC 10).
        end(exchange, false, statusCode)
        const leave = (): void => inFlight.leave()
        underWay.then(leave, leave)
      } else end(exchange, entered, statusCode)
    }
    try {
      if (deps.isDraining()) return deps.refuse(exchange, new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down; retry on another instance'))
      const refusal = refuseHead(exchange.head)
      if (refusal !== undefined) {
        exchange.answerHeaders.connection = 'close'
        // Planned as a refusal, as the other early ones: a legacy route's answer carries its
        // deprecation headers and `x-v4gw-served-by` (SPEC 13, 14), and the registry counts it (SPEC 12).
        return deps.refuse(exchange, refusal)
      }
      entered = inFlight.tryEnter()
      if (!entered) {
        exchange.record.shedReason = 'in_flight'
        exchange.answerHeaders['retry-after'] = String(RETRY_AFTER_SECONDS)
        return deps.refuse(exchange, overloadedError('too many requests in flight'))
      }
      if (eventLoop.isLate()) {
        exchange.record.shedReason = 'event_loop'
        exchange.answerHeaders['retry-after'] = String(RETRY_AFTER_SECONDS)
        return deps.refuse(exchange, overloadedError('event-loop delay over the limit'))
      }
      if (!request.complete && requestBody(request) !== null) bodyStalls.watch(exchange)
      deps.serve(exchange)
    } catch (error) {
      answerError(exchange, error)
    }
  }

  function answerError(exchange: Exchange, error: unknown): void {
    // The 408 is the answer; the body read or upstream call it cut fails after it.
    if (exchange.bodyStalled) return
    if (deps.isDraining()) exchange.answerHeaders.connection = 'close'
    writeGatewayError(exchange, error, log)
  }

  /**
   * A body that stopped arriving: 408 if nothing was answered yet, then the connection goes, which
   * ends the body read or the upstream call (its upload cannot finish) and frees the slot.
   */
  function answerStalledBody(exchange: Exchange): void {
    answerBodyFailure(exchange, new GatewayError('REQUEST_TIMEOUT', 'the request body stopped arriving'))
  }

  function answerBrokenBody(response: object, error: GatewayError): boolean {
    const exchange = bodyStalls.find(response)
    if (exchange === undefined || exchange.response.headersSent || exchange.bodyStalled) return false
    bodyStalls.unwatch(exchange)
    answerBodyFailure(exchange, error)
    return true
  }

  /** The answer to a body that stalled or broke, then the connection goes (its upload cannot finish). */
  function answerBodyFailure(exchange: Exchange, error: GatewayError): void {
    const { request, response } = exchange
    // Read first: a response that ends lets go of its socket.
    const socket = response.socket ?? request.socket
    exchange.answerHeaders.connection = 'close'
    // An answer already under way can only be cut: its line says why.
    if (response.headersSent) exchange.record.brokenOffStatus = error.statusCode
    writeGatewayError(exchange, error, log)
    exchange.bodyStalled = true
    // An upstream call under way (native traffic streams the body as it comes) is not ended by
    // the connection going: its upload would wait for the rest of the body for good. One still
    // connecting is cancelled as it starts (a body can break in the packet after its head).
    exchange.cancelled = true
    exchange.cancel?.()
    if (socket === null || response.writableFinished) socket?.destroy()
    else response.once('finish', () => socket.destroy())
  }

  return {
    handle,
    answerError,
    answerBrokenBody,
    startSampling: eventLoop.start,
    stop: () => {
      eventLoop.stop()
      bodyStalls.stop()
    },
    settled: () => (open === 0 ? Promise.resolve() : new Promise((resolve) => whenSettled.push(resolve))),
    inFlight: inFlight.count
  }
}

/** The requests of each connection whose end has not been reported. */
const unfinishedBySocket = new WeakMap<Socket, Set<() => void>>()

/**
 * The connection's requests whose answers wait behind another's, ended with it. Node closes only
 * the response it is writing when a connection goes: an answer queued behind it (pipelining)
 * never reports 'close', and without this its in-flight slot, upstream call and access line were
 * lost for good.
 */
function unfinishedOn(socket: Socket): Set<() => void> {
  let unfinished = unfinishedBySocket.get(socket)
  if (unfinished === undefined) {
    const created = new Set<() => void>()
    unfinishedBySocket.set(socket, created)
    socket.once('close', () => {
      for (const finish of created) finish()
    })
    unfinished = created
  }
  return unfinished
}
