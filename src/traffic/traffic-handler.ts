import type { Logger } from 'pino'
import type { GatewayError } from '../errors/registry.js'
import type { RefusedUnread } from '../kernel/client-error.js'
import type { Exchange } from '../kernel/exchange.js'
import type { RequestHead } from '../kernel/request-head.js'
import { createTrafficKernel, type TrafficKernel } from '../kernel/traffic-kernel.js'
import type { AccessRecord } from '../observability/access-record.js'
import { createAccessLog, writesAccessLines } from '../observability/access-log.js'
import { isUpstreamFailure } from '../observability/log-gateway-error.js'
import { traceIdOf } from '../observability/trace-context.js'
import { createForwarder } from '../passthrough/forward-stream.js'
import { planRefusal, planRequest } from '../plan/plan-request.js'
import { planShadowCandidate, refusedStateKey } from '../plan/shadow-candidate.js'
import type { ShadowResults } from '../fleet/shadow-results.js'
import { createMemoryIdempotencyStore, type IdempotencyStore } from '../sessions/idempotency-store.js'
import type { SessionMap } from '../sessions/session-map.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import type { Tracing } from '../tracing/tracing.js'
import type { UpstreamClient, UpstreamResponse } from '../upstream/upstream-client.js'
import { roundMs } from '../util/round-ms.js'
import { createLiveClaims, type LiveClaims } from './run-idempotent.js'
import { pathOf, userAgentOf } from './request-fields.js'
import { runPlan, type RunDeps } from './run-plan.js'
import { createShadowRunner } from './run-shadow.js'
import { createTracedRequests } from './traced-requests.js'

/**
 * The trace a request's lines name, read from the head at the end (every request has one, planned
 * or refused before): with tracing on, the trace its span is in (the client's only when trusted).
 */
function traceIdOfLine(head: RequestHead, span: { traceId: string } | undefined): string | undefined {
  return span === undefined ? traceIdOf(head.headers.traceparent) : span.traceId
}

/** A request that has ended, as metrics and the migration report hear it. */
export interface FinishedRequest {
  readonly head: RequestHead
  readonly record: Readonly<AccessRecord>
  readonly statusCode: number
  readonly durationMs: number
}

export interface TrafficDeps {
  /** The current runtime: read once per request, so a reload never splits a request. */
  getRuntime: () => GatewayRuntime
  upstream: UpstreamClient
  sessions: SessionMap<UpstreamResponse>
  /** SPEC 16's records; the replica's own memory when none is given. */
  idempotency?: IdempotencyStore
  /** The claims held by keyed requests running now (SPEC 16's cut at shutdown); a set of its own when none is given. */
  liveClaims?: LiveClaims
  logger: Logger
  /** While draining, requests that still arrive (on kept-alive connections) get 503 SHUTTING_DOWN. */
  isDraining: () => boolean
  /** Hears every finished request: metrics and the migration report. */
  onRequestDone: (request: FinishedRequest) => void
  /** SPEC 17's spans, when `tracing.enabled`; without it the listener makes no span object. */
  tracing?: Tracing | undefined
  /** SPEC 15: where stage shadow's comparisons are counted; without it none is made. */
  shadowResults?: ShadowResults | undefined
  /** SPEC 17: a comparison's V4 call that got no answer (the `shadow` upstream failures). */
  onShadowUpstreamFailure?: ((tenant: string, cause: string) => void) | undefined
  /** The pool of the comparisons' V4 calls; `upstream` when not given. */
  shadowUpstream?: UpstreamClient | undefined
}

export type TrafficHandler = Omit<TrafficKernel, 'answerError'> & {
  /** The access line of a request Node refused before the handler saw it (malformed HTTP, CONNECT). */
  logRefusedUnread(refusal: GatewayError, refused: RefusedUnread): void
  /**
   * SPEC 15: every comparison still running is abandoned, before the grace period's cut closes
   * the connections of their legacy answers (which would otherwise end them as primary_error).
   */
  abandonComparisons(): void
}

/**
 * The traffic listener: the kernel admits each request and owns its lifecycle, the planner
 * decides what it becomes (SPEC 2-7), the runner carries that out, and its end is logged.
 * A plain node:http request listener rather than a fastify app: a proxy has one catch-all route,
 * no body parsing (native bodies are streamed, SPEC 7; legacy bodies read with their own limit,
 * SPEC 10) and no serialisation to hand over, so fastify's per-request lifecycle was cost with
 * nothing to show for it (docs/performance.md). Fastify serves the admin listener.
 */
export function createTrafficHandler(deps: TrafficDeps): TrafficHandler {
  const accessLog = createAccessLog(deps.logger)
  const traced = deps.tracing === undefined ? undefined : createTracedRequests(deps.tracing)
  const kernel = createTrafficKernel({
    logger: deps.logger,
    limits: () => deps.getRuntime().config.limits,
    maxEventLoopDelayMs: deps.getRuntime().config.limits.maxEventLoopDelayMs,
    isDraining: deps.isDraining,
    // Chosen once (`tracing.enabled` is restart-only): with tracing off a request costs what it
    // cost before tracing existed, not even a check (docs/performance.md).
    serve:
      traced === undefined
        ? function serveTraffic(exchange) {
            runPlan(planRequest(runtimeOf(exchange), exchange.head), exchange, run)
          }
        : function serveTracedTraffic(exchange) {
            traced.serve(exchange, runtimeOf(exchange), run)
          },
    refuse(exchange, error) {
      runPlan(planRefusal(runtimeOf(exchange), exchange.head, error), exchange, run)
    },
    onFinished:
      traced === undefined
        ? logRequest
        : function logTracedRequest(exchange, statusCode) {
            logRequest(exchange, statusCode, traced.end(exchange, deps.getRuntime()))
          }
  })
  const run: RunDeps = {
    upstream: deps.upstream,
    sessions: deps.sessions,
    idempotency: deps.idempotency ?? createMemoryIdempotencyStore(),
    liveClaims: deps.liveClaims ?? createLiveClaims(),
    forwardStream: createForwarder(deps.upstream, kernel.answerError, deps.isDraining),
    answerError: kernel.answerError,
    isDraining: deps.isDraining
  }
  // SPEC 15: the runner of stage shadow's comparisons; the planner's candidate is translate's plan.
  const shadow = deps.shadowResults === undefined ? undefined : createShadowRunner({ upstream: deps.shadowUpstream ?? deps.upstream, results: deps.shadowResults, planCandidate: planShadowCandidate, refusedStateKey, currentRuntime: deps.getRuntime, onUpstreamFailure: deps.onShadowUpstreamFailure })
  if (shadow !== undefined) run.shadow = (exchange, plan) => shadow.begin(deps.getRuntime(), exchange, plan)

  /**
   * The runtime a request runs under, read once, and its `log.access` kept for the request's line
   * (SPEC 17: a request under way finishes under the config it started with).
   */
  function runtimeOf(exchange: Exchange): GatewayRuntime {
    const runtime = deps.getRuntime()
    exchange.record.accessLine = runtime.config.log.access
    return runtime
  }

  /** `span`: the request's SERVER span's ids, when tracing is on (SPEC 17: logs and traces join). */
  function logRequest(exchange: Exchange, statusCode: number, span?: { traceId: string; spanId: string }): void {
    const { head, record } = exchange
    const durationMs = performance.now() - head.startedAt
    deps.onRequestDone({ head, record, statusCode, durationMs })
    // SPEC 17: `log.access: false` turns the lines off; as the config the request started with
    // said, so a reload turns them for the requests after it. A level above info writes none
    // either: the line's fields are not gathered for nothing.
    if (!(record.accessLine ?? deps.getRuntime().config.log.access)) return logFailureWithoutAccessLine(exchange, statusCode, span)
    // Above info the operator asked for no info lines: SPEC 17 reports an upstream failure on the
    // access line and no other line (its metrics count it); `log.access: false` is the exception.
    if (!writesAccessLines(deps.logger)) return
    accessLog({
      requestId: head.requestId,
      traceId: traceIdOfLine(head, span),
      spanId: span?.spanId,
      method: head.method,
      path: pathOf(head.url),
      tenant: record.tenant,
      requestedTenant: record.requestedTenant,
      class: record.trafficClass,
      route: record.legacyRoute,
      v4Path: record.v4Path,
      clientId: record.clientId,
      stage: record.stage,
      servedBy: record.servedBy,
      deprecation: record.deprecationAction,
      status: statusCode,
      durationMs: roundMs(durationMs),
      upstreamMs: record.upstreamMs === undefined ? undefined : roundMs(record.upstreamMs),
      bytesOut: record.bytesOut,
      session: record.sessionOutcome,
      idempotency: record.idempotencyOutcome,
      error: record.errorCode,
      cause: record.upstreamFailure?.cause,
      clientAddress: head.clientAddress,
      userAgent: userAgentOf(head.headers['user-agent'])
    })
  }

  /**
   * With the access lines off (`log.access: false`), "errors are still logged" (SPEC 17): an
   * upstream failure, which the access line would have named (its `error` and `cause`; the
   * gateway's own errors have their own line), gets a warn line of its own. At debug some
   * failures also have a debug line with the error itself (log-gateway-error.ts), not all: a
   * stream broken off after its head, a kept 504 of a keyed call.
   */
  function logFailureWithoutAccessLine(exchange: Exchange, statusCode: number, span: { traceId: string; spanId: string } | undefined): void {
    const { head, record } = exchange
    if (record.errorCode === undefined || !isUpstreamFailure(record.errorCode)) return
    deps.logger.warn(
      {
        requestId: head.requestId,
        traceId: traceIdOfLine(head, span),
        spanId: span?.spanId,
        method: head.method,
        path: pathOf(head.url),
        tenant: record.tenant,
        route: record.legacyRoute,
        status: statusCode,
        error: record.errorCode,
        cause: record.upstreamFailure?.cause
      },
      'upstream failure'
    )
  }

  function abandonComparisons(): void {
    shadow?.abandonAll()
  }

  return {
    handle: kernel.handle,
    answerBrokenBody: kernel.answerBrokenBody,
    logRefusedUnread(refusal, refused) {
      // SPEC 17: its access line, as every request's; only what Node let the gateway know of it.
      if (!deps.getRuntime().config.log.access || !writesAccessLines(deps.logger)) return
      accessLog({
        requestId: refused.requestId,
        method: refused.method,
        tenant: undefined,
        class: undefined,
        route: undefined,
        v4Path: undefined,
        status: refusal.statusCode,
        durationMs: 0,
        upstreamMs: undefined,
        bytesOut: refused.bytesOut,
        session: undefined,
        error: refusal.code,
        clientAddress: refused.clientAddress
      })
    },
    startSampling: kernel.startSampling,
    stop() {
      kernel.stop()
      // SPEC 15: client requests are done; comparisons still running are abandoned, never waited for.
      abandonComparisons()
    },
    abandonComparisons,
    settled: kernel.settled,
    inFlight: kernel.inFlight
  }
}
