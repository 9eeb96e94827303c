import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { Logger } from 'pino'
import { removeQueryCredential, rewriteProxyCredentialHeaders } from '../credentials/index.js'
import { roundMs, writeGatewayError } from '../errors/error-handler.js'
import { ERROR_STATUS, GatewayError } from '../errors/registry.js'
import type { GatewayRuntime } from '../gateway-runtime.js'
import { authorizeRuntimeCall, credentialHeaders, parseRuntimeBody, readLegacyCredential } from '../legacy/prepare-legacy-call.js'
import { readBody } from '../legacy/read-body.js'
import { runtimeCallHeaders } from '../legacy/runtime-call-headers.js'
import type { RouteMatch } from '../legacy/route-table.js'
import { runLegacyCall } from '../legacy/run-legacy-call.js'
import { shapeLegacyResponse } from '../legacy/shape-response.js'
import { createAccessLog } from '../observability/access-log.js'
import { createForwarder } from '../passthrough/forward-stream.js'
import { fingerprintToken } from '../sessions/session-key.js'
import type { SessionMap } from '../sessions/session-map.js'
import type { TenantRuntime } from '../tenancy/tenant-runtime.js'
import type { UpstreamClient, UpstreamResponse } from '../upstream/upstream-client.js'
import { listenerProtocol } from '../util/forwarded-headers.js'
import { putOwnHeaders } from '../util/own-headers.js'
import { classifyRequest, rewrittenProxyPath, type RequestHead } from './classify-request.js'
import { createEventLoopMonitor, createInFlightLimiter, overloadedError, RETRY_AFTER_SECONDS } from './load-shedding.js'
import { continueIfExpected, requestBody } from './request-body.js'
import type { RequestTarget } from './request-target.js'
import { TrafficContext } from './traffic-context.js'
import { createBodyStallWatch } from './body-stall.js'

export interface TrafficDeps {
  /** The current runtime: read once per request, so a reload never splits a request. */
  getRuntime: () => GatewayRuntime
  upstream: UpstreamClient
  sessions: SessionMap<UpstreamResponse>
  logger: Logger
  /** While draining, requests that still arrive (on kept-alive connections) get 503 SHUTTING_DOWN. */
  isDraining: () => boolean
  /** Hears every finished request: metrics and the migration report. */
  onRequestDone: (traffic: TrafficContext, statusCode: number, userAgent: string | undefined) => void
}

export interface TrafficHandler {
  /** node:http's request listener for the traffic listener. */
  handle(request: IncomingMessage, response: ServerResponse): void
  /** Stops the event-loop sampler. */
  stop(): void
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
 * The traffic listener: every request is legacy, native, blocked or unknown (SPEC 2). A plain
 * node:http request listener rather than a fastify app: a proxy has one catch-all route, no
 * body parsing (native bodies are streamed, SPEC 7; legacy bodies read with their own limit,
 * SPEC 10) and no serialisation to hand over, so fastify's per-request lifecycle was cost with
 * nothing to show for it (docs/performance.md). Fastify serves the admin listener.
 */
export function createTrafficHandler(deps: TrafficDeps): TrafficHandler {
  const log = deps.logger
  const accessLog = createAccessLog(log)
  const forwardStream = createForwarder(deps.upstream, answerError, deps.isDraining)
  const inFlight = createInFlightLimiter(() => deps.getRuntime().config.limits.maxInFlight)
  const eventLoop = createEventLoopMonitor(deps.getRuntime().config.limits.maxEventLoopDelayMs)
  // A client body that makes no progress for the upstream limit is cut as the upstream's would be.
  const bodyStalls = createBodyStallWatch(() => deps.getRuntime().config.limits.upstreamTimeoutMs, answerStalledBody)

  let open = 0
  let whenSettled: (() => void)[] = []

  function handle(request: IncomingMessage, response: ServerResponse): void {
    const traffic = new TrafficContext(request, response)
    let entered = false
    let finished = false
    open++
    // One function ends every request, answered or aborted: it frees the in-flight slot, cancels
    // an upstream call still under way, and writes the access-log line and metrics. The response's
    // 'close' calls it, or the connection's for an answer queued behind a pipelined one (it has
    // no socket yet, and Node never closes it).
    response.once('close', finishTraffic)
    const queuedOn = response.socket === null ? unfinishedOn(request.socket) : undefined
    queuedOn?.add(finishTraffic)
    function finishTraffic(): void {
      if (finished) return
      finished = true
      queuedOn?.delete(finishTraffic)
      bodyStalls.unwatch(traffic)
      if (entered) inFlight.leave()
      const aborted = !response.writableFinished
      if (aborted) {
        traffic.cancelled = true
        traffic.cancel?.()
      }
      logAccess(traffic, aborted ? (traffic.brokenOffStatus ?? CLIENT_CLOSED_REQUEST) : response.statusCode)
      if (--open === 0 && whenSettled.length > 0) {
        for (const resolve of whenSettled) resolve()
        whenSettled = []
      }
    }
    try {
      if (deps.isDraining()) throw new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down; retry on another instance')
      // RFC 9112 3.2: an HTTP/1.1 request without Host, or with more than one, is answered 400.
      const hostProblem = checkHost(request)
      if (hostProblem !== undefined) {
        traffic.ownHeaders.connection = 'close'
        throw new GatewayError('INVALID_REQUEST', `an HTTP/1.1 request needs exactly one Host header`, { details: [{ pointer: 'header:host', message: hostProblem }] })
      }
      // RFC 9112 6.1: Node de-chunks a `gzip, chunked` body but leaves it gzip-coded, and the
      // header goes as hop-by-hop: the upstream would read coded bytes as the body itself.
      const codings = request.headers['transfer-encoding']
      if (codings !== undefined && codings.toLowerCase() !== 'chunked') {
        traffic.ownHeaders.connection = 'close'
        throw new GatewayError('INVALID_REQUEST', 'the only transfer coding served is chunked', { details: [{ pointer: 'header:transfer-encoding', message: 'expected chunked alone' }] })
      }
      entered = inFlight.tryEnter()
      if (!entered) {
        traffic.ownHeaders['retry-after'] = String(RETRY_AFTER_SECONDS)
        throw overloadedError('too many requests in flight')
      }
      if (eventLoop.isLate()) {
        traffic.ownHeaders['retry-after'] = String(RETRY_AFTER_SECONDS)
        throw overloadedError('event-loop delay over the limit')
      }
      if (!request.complete && requestBody(request) !== null) bodyStalls.watch(traffic)
      route(traffic)
    } catch (error) {
      answerError(traffic, error)
    }
  }

  /** The gateway's own error answer. While draining, every answer closes its connection (SPEC 9). */
  function answerError(traffic: TrafficContext, error: unknown): void {
    // The 408 is the answer; the body read or upstream call it cut fails after it.
    if (traffic.bodyStalled) return
    if (deps.isDraining()) traffic.ownHeaders.connection = 'close'
    writeGatewayError(traffic, error, log)
  }

  /**
   * A body that stopped arriving: 408 if nothing was answered yet, then the connection goes, which
   * ends the body read or the upstream call (its upload cannot finish) and frees the slot.
   */
  function answerStalledBody(traffic: TrafficContext): void {
    // Read first: a response that ends lets go of its socket.
    const socket = traffic.response.socket ?? traffic.request.socket
    traffic.ownHeaders.connection = 'close'
    // An answer already under way can only be cut: its line says why.
    if (traffic.response.headersSent) traffic.brokenOffStatus = ERROR_STATUS.REQUEST_TIMEOUT
    writeGatewayError(traffic, new GatewayError('REQUEST_TIMEOUT', 'the request body stopped arriving'), log)
    traffic.bodyStalled = true
    // An upstream call under way (native traffic streams the body as it comes) is not ended by
    // the connection going: its upload would wait for the rest of the body for good.
    traffic.cancel?.()
    if (socket === null || traffic.response.writableFinished) socket?.destroy()
    else traffic.response.once('finish', () => socket.destroy())
  }

  function logAccess(traffic: TrafficContext, status: number): void {
    deps.onRequestDone(traffic, status, traffic.request.headers['user-agent'])
    accessLog({
      requestId: traffic.id,
      tenant: traffic.tenant,
      class: traffic.trafficClass,
      route: traffic.legacyRoute,
      v4Path: traffic.v4Path,
      status,
      durationMs: roundMs(performance.now() - traffic.startedAt),
      upstreamMs: traffic.upstreamMs === undefined ? undefined : roundMs(traffic.upstreamMs),
      session: traffic.sessionOutcome,
      error: traffic.errorCode
    })
  }

  function route(traffic: TrafficContext): void {
    const runtime = deps.getRuntime()
    const classification = classifyRequest(runtime, traffic.request as RequestHead, traffic)
    traffic.trafficClass = classification.trafficClass
    const { tenant, target } = classification
    if (classification.trafficClass === 'legacy') {
      handleLegacy(traffic, runtime, tenant, classification.match, target).catch((error: unknown) => answerError(traffic, error))
      return
    }
    // Native traffic, or unknown traffic under `fallback: proxy`: the upstream path is the request's.
    traffic.v4Path = target.pathname
    // The target as the client sent it (SPEC 7: path and query unchanged; a bare "?" included).
    forwardStream(traffic, { origin: tenant.upstreamOrigin, target: traffic.request.url as string, timeoutMs: runtime.config.limits.upstreamTimeoutMs })
  }

  async function handleLegacy(traffic: TrafficContext, runtime: GatewayRuntime, tenant: TenantRuntime, match: RouteMatch, target: RequestTarget): Promise<void> {
    const { request, response } = traffic
    const { route } = match
    traffic.legacyRoute = route.label
    // On every answer, the gateway's own errors included.
    traffic.ownHeaders['x-request-id'] = traffic.id
    if (tenant.deprecationHeaders !== null) Object.assign(traffic.ownHeaders, tenant.deprecationHeaders)

    const proxyPath = route.action === 'proxy' ? rewrittenProxyPath(runtime, match, traffic) : undefined
    const credentials = runtime.config.credentials
    const credential = readLegacyCredential(credentialHeaders(request.rawHeaders, credentials.sources), target.rawQuery, credentials)
    const credentialFingerprint = credential === null ? undefined : fingerprintToken(credential.value)
    traffic.clientFingerprint = credentialFingerprint

    if (proxyPath !== undefined) {
      traffic.v4Path = proxyPath
      const query = removeQueryCredential(target.rawQuery, credentials.queryParam)
      forwardStream(traffic, {
        origin: tenant.upstreamOrigin,
        target: query === '' ? proxyPath : `${proxyPath}?${query}`,
        timeoutMs: runtime.config.limits.upstreamTimeoutMs,
        rewriteHeaders: (headers) => rewriteProxyCredentialHeaders(headers, credential)
      })
      return
    }

    const authorization = authorizeRuntimeCall(credential, request.headers['content-type'], request.headers['content-encoding'])
    const bytes = await readBody(requestBody(request), request.headers['content-length'], runtime.config.limits.bodyBytes, () => continueIfExpected(request, response))
    const { body, call } = parseRuntimeBody(bytes, tenant, route)

    const result = await runLegacyCall(
      {
        tenant,
        route,
        params: match.params,
        call,
        body,
        requestHeaders: request.headers,
        upstreamHeaders: runtimeCallHeaders(request.headers, request.socket.remoteAddress, listenerProtocol(request.socket), traffic.id, authorization),
        // authorizeRuntimeCall succeeded, so a credential was presented.
        tokenFingerprint: credentialFingerprint as string,
        cancelScope: traffic,
        trace: traffic
      },
      { upstream: deps.upstream, sessions: deps.sessions, sessionsConfig: runtime.config.sessions, upstreamTimeoutMs: runtime.config.limits.upstreamTimeoutMs }
    )
    const shaped = shapeLegacyResponse(result.response.statusCode, result.response.headers, result.response.body, {
      requestId: traffic.id,
      totalMs: roundMs(performance.now() - traffic.startedAt),
      sessionId: result.sessionId,
      responseFields: tenant.responseFields
    })
    // x-request-id and the tenant's deprecation headers, set on traffic.ownHeaders above.
    const headers = putOwnHeaders(shaped.headers, traffic.ownHeaders)
    if (result.sessionId !== undefined) headers['x-v4-session-id'] = result.sessionId
    // RFC 9110 8.6 / 6.4.1: 1xx, 204 and 304 answers have no content and no Content-Length.
    const bodiless = shaped.statusCode < 200 || shaped.statusCode === 204 || shaped.statusCode === 304
    if (!bodiless) headers['content-length'] = typeof shaped.payload === 'string' ? Buffer.byteLength(shaped.payload) : shaped.payload.length
    if (deps.isDraining()) headers.connection = 'close'
    if (response.destroyed) return
    response.writeHead(shaped.statusCode, headers)
    response.end(bodiless ? undefined : shaped.payload)
  }

  return {
    handle,
    stop: () => {
      eventLoop.stop()
      bodyStalls.stop()
    },
    settled: () => (open === 0 ? Promise.resolve() : new Promise((resolve) => whenSettled.push(resolve)))
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

/** Why the request's Host is not usable (RFC 9112 3.2), or undefined. Node keeps only the first of two. */
function checkHost(request: IncomingMessage): string | undefined {
  if (request.headers.host === undefined) return request.httpVersion === '1.1' ? 'missing' : undefined
  const raw = request.rawHeaders
  let seen = 0
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index] as string
    if (name.length === 4 && name.toLowerCase() === 'host' && ++seen > 1) return 'sent more than once'
  }
  return undefined
}
