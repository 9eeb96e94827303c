import type { Readable } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { removeQueryCredential, rewriteProxyCredentialHeaders } from '../credentials/index.js'
import { roundMs, sendGatewayError } from '../errors/error-handler.js'
import type { GatewayRuntime } from '../gateway-runtime.js'
import { authorizeRuntimeCall, parseRuntimeBody, readLegacyCredential } from '../legacy/prepare-legacy-call.js'
import { readBody } from '../legacy/read-body.js'
import { buildRewrittenPath, type RouteMatch } from '../legacy/route-table.js'
import { runLegacyCall } from '../legacy/run-legacy-call.js'
import { shapeLegacyResponse } from '../legacy/shape-response.js'
import { createForwarder } from '../passthrough/forward-stream.js'
import { fingerprintToken } from '../sessions/session-key.js'
import type { SessionMap } from '../sessions/session-map.js'
import type { TenantRuntime } from '../tenancy/tenant-runtime.js'
import type { UpstreamClient, UpstreamResponse } from '../upstream/upstream-client.js'
import { classifyRequest } from './classify-request.js'
import { createInFlightLimiter, overloadedError, registerEventLoopShedding, RETRY_AFTER_SECONDS } from './load-shedding.js'
import type { RequestTarget } from './request-target.js'
import { forwardedHeaders } from '../util/forwarded-headers.js'
import { appendLink } from '../util/link-header.js'
import { GatewayError } from '../errors/registry.js'
import type { TrafficContext } from './traffic-context.js'

export interface TrafficDeps {
  /** The current runtime: read once per request, so a reload never splits a request. */
  getRuntime: () => GatewayRuntime
  upstream: UpstreamClient
  sessions: SessionMap<UpstreamResponse>
  /** While draining, requests that still arrive (on kept-alive connections) get 503 SHUTTING_DOWN. */
  isDraining: () => boolean
  /** Hears every finished request: metrics and the migration report. */
  onRequestDone: (traffic: TrafficContext, statusCode: number, userAgent: string | undefined) => void
}

/** Logged for a client that went away before its answer was written (nginx's convention). */
const CLIENT_CLOSED_REQUEST = 499

/** The traffic listener: every request is legacy, native, blocked or unknown (SPEC 2). */
export async function trafficPlugin(app: FastifyInstance, deps: TrafficDeps): Promise<void> {
  app.decorateRequest('traffic', null as never)
  // Bodies stay unread streams here: native and proxy bodies are streamed (SPEC 7) and legacy
  // bodies are read with their own limit (SPEC 10).
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', function deferBody(_request, payload, done) {
    done(null, payload)
  })
  const forwardStream = createForwarder(deps.upstream)
  const inFlight = createInFlightLimiter(() => deps.getRuntime().config.limits.maxInFlight)

  /**
   * The one per-request hook: the traffic context, then draining and the in-flight limit. One
   * 'close' listener ends every request, answered or aborted: it frees the in-flight slot,
   * cancels an upstream call still under way, and writes the access-log line and metrics.
   */
  app.addHook('onRequest', function startTraffic(request, reply, done) {
    const traffic: TrafficContext = { startedAt: performance.now(), cancelled: false, cancel: undefined }
    request.traffic = traffic
    let entered = false
    reply.raw.once('close', function finishTraffic() {
      if (entered) inFlight.leave()
      const aborted = !reply.raw.writableFinished
      if (aborted) {
        traffic.cancelled = true
        traffic.cancel?.()
      }
      logAccess(request, aborted ? CLIENT_CLOSED_REQUEST : reply.raw.statusCode)
    })
    if (deps.isDraining()) {
      reply.header('connection', 'close')
      return done(new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down; retry on another instance'))
    }
    // RFC 9112 3.2: an HTTP/1.1 request without Host, or with more than one, is answered 400.
    const hostProblem = checkHost(request)
    if (hostProblem !== undefined) {
      reply.header('connection', 'close')
      return done(new GatewayError('INVALID_REQUEST', `an HTTP/1.1 request needs exactly one Host header`, { details: [{ pointer: 'header:host', message: hostProblem }] }))
    }
    entered = inFlight.tryEnter()
    if (!entered) {
      reply.header('retry-after', String(RETRY_AFTER_SECONDS))
      return done(overloadedError('too many requests in flight'))
    }
    done()
  })
  // After startTraffic, so that a shed request still has its context for the error and the log.
  await registerEventLoopShedding(app, deps.getRuntime().config.limits.maxEventLoopDelayMs)

  function logAccess(request: FastifyRequest, status: number): void {
    const traffic = request.traffic
    deps.onRequestDone(traffic, status, request.headers['user-agent'])
    // The root logger with the id as a field: no per-request child logger on the hot path.
    app.log.info(
      {
        requestId: request.id,
        tenant: traffic.tenant,
        class: traffic.trafficClass,
        route: traffic.legacyRoute,
        v4Path: traffic.v4Path,
        status,
        durationMs: roundMs(performance.now() - traffic.startedAt),
        upstreamMs: traffic.upstreamMs === undefined ? undefined : roundMs(traffic.upstreamMs),
        session: traffic.sessionOutcome,
        error: traffic.errorCode
      },
      'request'
    )
  }
  app.setErrorHandler(sendGatewayError)
  app.setNotFoundHandler(function handleUnroutable(request, reply) {
    return handleTraffic(request, reply)
  })
  app.all('*', function handleRequest(request, reply) {
    return handleTraffic(request, reply)
  })

  async function handleTraffic(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const runtime = deps.getRuntime()
    const classification = classifyRequest(runtime, request, request.traffic)
    request.traffic.trafficClass = classification.trafficClass
    const { tenant, target } = classification
    if (classification.trafficClass === 'legacy') return handleLegacy(request, reply, runtime, tenant, classification.match, target)
    if (classification.trafficClass === 'native') request.traffic.v4Path = target.pathname
    return forwardStream(request, reply, { origin: tenant.upstreamOrigin, path: target.pathname, query: target.rawQuery, timeoutMs: runtime.config.limits.upstreamTimeoutMs })
  }

  async function handleLegacy(
    request: FastifyRequest,
    reply: FastifyReply,
    runtime: GatewayRuntime,
    tenant: TenantRuntime,
    match: RouteMatch,
    target: RequestTarget
  ): Promise<FastifyReply> {
    const { route } = match
    request.traffic.legacyRoute = `${route.method} ${route.path}`
    reply.header('x-request-id', request.id)
    // Set now for the gateway's own errors; set again over the upstream's headers on success.
    if (tenant.deprecationHeaders !== null) reply.headers(tenant.deprecationHeaders)

    const credentials = runtime.config.credentials
    const credential = readLegacyCredential(request.raw.headersDistinct, target.rawQuery, credentials)
    const credentialFingerprint = credential === null ? undefined : fingerprintToken(credential.value)
    request.traffic.clientFingerprint = credentialFingerprint

    if (route.action === 'proxy') {
      const path = buildRewrittenPath(route, match.params)
      request.traffic.v4Path = path
      return forwardStream(request, reply, {
        origin: tenant.upstreamOrigin,
        path,
        query: removeQueryCredential(target.rawQuery, credentials.queryParam),
        timeoutMs: runtime.config.limits.upstreamTimeoutMs,
        rewriteHeaders: (headers) => rewriteProxyCredentialHeaders(headers, credential)
      })
    }

    const authorization = authorizeRuntimeCall(credential, request.headers['content-type'])
    const bytes = await readBody(request.body as Readable | undefined, request.headers['content-length'], runtime.config.limits.bodyBytes)
    const { body, call } = parseRuntimeBody(bytes, tenant, route)

    const result = await runLegacyCall(
      {
        tenant,
        route,
        params: match.params,
        call,
        body,
        requestHeaders: request.headers,
        upstreamHeaders: buildUpstreamHeaders(request, authorization),
        // authorizeRuntimeCall succeeded, so a credential was presented.
        tokenFingerprint: credentialFingerprint as string,
        cancelScope: request.traffic
      },
      { upstream: deps.upstream, sessions: deps.sessions, sessionsConfig: runtime.config.sessions, upstreamTimeoutMs: runtime.config.limits.upstreamTimeoutMs }
    )
    request.traffic.v4Path = result.v4Path
    request.traffic.upstreamMs = result.upstreamMs
    request.traffic.sessionOutcome = result.sessionOutcome

    const shaped = shapeLegacyResponse(result.response.statusCode, result.response.headers, result.response.body, {
      requestId: request.id,
      totalMs: roundMs(performance.now() - request.traffic.startedAt),
      sessionId: result.sessionId,
      responseFields: tenant.responseFields
    })
    reply.code(shaped.statusCode).headers(shaped.headers).header('x-request-id', request.id)
    if (tenant.deprecationHeaders !== null) setDeprecationHeaders(reply, tenant.deprecationHeaders, shaped.headers.link)
    if (result.sessionId !== undefined) reply.header('x-v4-session-id', result.sessionId)
    return reply.send(shaped.payload)
  }
}

/** RFC 9745 / RFC 8594 headers win over the upstream's; an upstream `Link` is kept beside the deprecation link. */
function setDeprecationHeaders(reply: FastifyReply, headers: Readonly<Record<string, string>>, upstreamLink: string | string[] | undefined): void {
  for (const [name, value] of Object.entries(headers)) {
    reply.header(name, name === 'link' ? appendLink(upstreamLink, value) : value)
  }
}

/** Why the request's Host is not usable (RFC 9112 3.2), or undefined. Node keeps only the first of two. */
function checkHost(request: FastifyRequest): string | undefined {
  if (request.headers.host === undefined) return request.raw.httpVersion === '1.1' ? 'missing' : undefined
  const raw = request.raw.rawHeaders
  let seen = 0
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index] as string
    if (name.length === 4 && name.toLowerCase() === 'host' && ++seen > 1) return 'sent more than once'
  }
  return undefined
}

/** Headers of every V4 call made for a legacy request: one credential, and nothing else of the client's but its agent. */
function buildUpstreamHeaders(request: FastifyRequest, authorization: string): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json',
    // The gateway reads these answers, so it asks for them uncompressed.
    'accept-encoding': 'identity',
    authorization,
    'x-request-id': request.id,
    ...forwardedHeaders(request.headers, request.socket.remoteAddress, request.protocol)
  }
  const userAgent = request.headers['user-agent']
  if (userAgent !== undefined) headers['user-agent'] = userAgent
  return headers
}
