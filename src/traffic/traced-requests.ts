import type { ServerResponse } from 'node:http'
import { ERROR_STATUS } from '../errors/registry.js'
import type { Exchange } from '../kernel/exchange.js'
import type { AccessRecord } from '../observability/access-record.js'
import { V4_EXECUTE_PATH, V4_SESSIONS_START_PATH } from '../legacy/legacy-calls.js'
import { planRequest, type Plan } from '../plan/plan-request.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import type { CallNames, RequestSpan, ServerSpanFacts } from '../tracing/request-span.js'
import type { Tracing } from '../tracing/tracing.js'
import type { UpstreamRequest } from '../upstream/upstream-client.js'
import { pathOf, userAgentOf } from './request-fields.js'
import { runPlan, type RunDeps } from './run-plan.js'

/** SPEC 17's names of the V4 calls a legacy request makes: their templates, never an id. */
const SESSIONS_START_SPAN = `POST ${V4_SESSIONS_START_PATH}`
const EXECUTE_SPAN = `POST ${V4_EXECUTE_PATH}`
const SESSION_EXECUTE_SPAN = 'POST /v4/sessions/{sessionId}/executions.execute'
const SESSION_EXECUTE_PATH = /^\/v4\/sessions\/[^/]+\/executions\.execute$/
/** SPEC 17: native traffic's route. */
const NATIVE_ROUTE = '/v4/*'

export interface TracedRequests {
  /** Starts the request's SERVER span, then plans and runs it, its upstream calls traced by the span (CLIENT spans). */
  serve(exchange: Exchange, runtime: GatewayRuntime, run: RunDeps): void
  /** Ends the SERVER span (making it now for a request the kernel refused before serving it); its ids go on the access line. */
  end(exchange: Exchange, runtime: GatewayRuntime): RequestSpan
}

/**
 * The traffic listener's requests with tracing on (SPEC 17): the only place that makes spans
 * for them. Used only when `tracing.enabled` (traffic-handler.ts picks it once), so that a
 * gateway without tracing allocates nothing of it.
 */
export function createTracedRequests(tracing: Tracing): TracedRequests {
  function start(exchange: Exchange, runtime: GatewayRuntime): RequestSpan {
    const span = tracing.startRequest(exchange.head, runtime.config.tracing, runtime.config.credentials.queryParam)
    exchange.span = span
    return span
  }

  return {
    serve(exchange, runtime, run) {
      const span = start(exchange, runtime)
      const plan = planRequest(runtime, exchange.head)
      // The same runner and upstream client as an untraced request: the client asks the request's
      // tracer for each call's span (upstream-client.ts); names are asked only when recording.
      exchange.callTracer = span.callTracer(() => callNames(plan, exchange.head.method, runtime))
      runPlan(plan, exchange, run)
    },
    end(exchange, runtime) {
      // A request the kernel refused (draining, a bad head, load shedding) was never served.
      const served = exchange.span !== undefined
      const span = exchange.span ?? start(exchange, runtime)
      // Facts only for a sampled span: most requests (sampleRatio 0.01) build none.
      span.end(span.recording ? serverSpanFacts(exchange, served) : undefined, performance.now())
      return span
    }
  }
}

/** How one request's calls are named: V4 calls by their templates (SPEC 17), its streamed call by its route. */
function callNames(plan: Plan, method: string, runtime: GatewayRuntime): CallNames {
  return {
    buffered: v4CallNamer(),
    streamed() {
      const facts = plan.facts
      if (facts.trafficClass === 'native') return `${method} ${NATIVE_ROUTE}`
      if (facts.legacyRoute === undefined || facts.tenant === undefined) return method
      // The legacy upstream gets the route as it came (SPEC 14: `POST /v1/…`), a proxy route's too;
      // V4 gets a proxy route's rewrite, named by its template.
      if (plan.kind === 'stream' && plan.call.upstream === 'legacy') return facts.legacyRoute
      const route = runtime.tenancy.tenants.get(facts.tenant)?.routes.find((candidate) => candidate.label === facts.legacyRoute)
      return route?.rewrite === undefined ? facts.legacyRoute : `${route.method} ${route.rewrite}`
    },
    queryCredential: runtime.config.credentials.queryParam,
    shadow: false
  }
}

/**
 * SPEC 15's comparison of a request in stage shadow: its V4 calls are CLIENT spans of the
 * request's SERVER span (SPEC 17: `v4gw.shadow: true`), named by the same templates as a
 * translated request's calls.
 */
export function shadowCallNames(runtime: GatewayRuntime): CallNames {
  return { buffered: v4CallNamer(), streamed: () => 'POST', queryCredential: runtime.config.credentials.queryParam, shadow: true }
}

/** Names one request's V4 calls by their templates (SPEC 17), counting an execution sent again as a resend. */
function v4CallNamer(): CallNames['buffered'] {
  let executions = 0
  return function nameV4Call(request: UpstreamRequest) {
    if (request.path === V4_SESSIONS_START_PATH) return { name: SESSIONS_START_SPAN }
    if (request.path === V4_EXECUTE_PATH) return { name: EXECUTE_SPAN }
    if (SESSION_EXECUTE_PATH.test(request.path)) {
      // SPEC 4 step 5: the execution sent again after a stale session is a resend.
      executions++
      return { name: SESSION_EXECUTE_SPAN, resendCount: executions > 1 ? executions - 1 : undefined }
    }
    return { name: request.method }
  }
}

/** The credential kinds of SPEC 5 as SPEC 17's `v4gw.credential.type` names them. */
const CREDENTIAL_TYPES: Readonly<Record<string, string>> = { 'session-token': 'session', 'service-key': 'service-key', 'service-account-id': 'service-account-id', none: 'none' }

function serverSpanFacts(exchange: Exchange, served: boolean): ServerSpanFacts {
  const { head, record, response } = exchange
  const { statusCode, failed } = serverSpanStatus(response, record)
  const route = record.trafficClass === 'native' ? NATIVE_ROUTE : record.legacyRoute?.slice(record.legacyRoute.indexOf(' ') + 1)
  // A query only of an origin-form target (the only form served): in an absolute-form one the first
  // `?` may sit in userinfo (`http://u:pa?ss@h/x`, refused, but traced), as pathOf keeps its authority out.
  const queryAt = head.url.charCodeAt(0) === 0x2f && head.url.charCodeAt(1) !== 0x2f ? head.url.indexOf('?') : -1
  // Only a Host the kernel accepted (RFC 9112 3.2): a refused one may be anything, a password included.
  const host = served ? hostOf(head.headers.host, head.protocol) : undefined
  return {
    name: record.trafficClass === 'native' ? `${head.method} ${NATIVE_ROUTE}` : (record.legacyRoute ?? head.method),
    route,
    statusCode,
    failed,
    errorCode: record.errorCode,
    scheme: head.protocol,
    path: pathOf(head.url),
    rawQuery: queryAt === -1 ? '' : head.url.slice(queryAt + 1).split('#', 1)[0] as string,
    httpVersion: head.httpVersion,
    serverAddress: host?.address,
    serverPort: host?.port,
    clientAddress: head.clientAddress,
    userAgent: userAgentOf(head.headers['user-agent']),
    tenant: record.tenant,
    trafficClass: record.trafficClass,
    legacyRoute: record.legacyRoute,
    sessionOutcome: record.sessionOutcome,
    credentialType: record.credentialType === undefined ? undefined : CREDENTIAL_TYPES[record.credentialType],
    // SPEC 14: the effective stage and the side that answered (the gateway's error writer makes it `gateway`).
    migrationStage: record.stage,
    servedBy: record.servedBy,
    deprecationAction: record.deprecationAction,
    idempotencyOutcome: record.idempotencyOutcome
  }
}

/**
 * SPEC 17's `http.response.status_code` as the semantic conventions define it: the status sent,
 * not the access line's (499 for a client that left first, the cause's status for a body cut
 * after its head: docs/decisions.md); and whether the SERVER span is an error: a 5xx sent, a body
 * cut after its head, or, with nothing sent, a failure of the gateway's side (a 5xx code; a 4xx
 * is the client's).
 */
export function serverSpanStatus(
  response: Pick<ServerResponse, 'headersSent' | 'writableFinished' | 'socket' | 'statusCode'>,
  record: Pick<AccessRecord, 'errorCode' | 'brokenOffStatus' | 'bytesOut'>
): { statusCode: number | undefined; failed: boolean } {
  // Node writes a head with the first body bytes or the end, not at `writeHead` (a streamed answer
  // whose client left before its first chunk sent nothing); and a pipelined answer whose
  // connection closed while it waited its turn had its head buffered only, never on a socket.
  const sent = response.headersSent && (response.writableFinished || (response.socket !== null && record.bytesOut > 0))
  if (!sent) return { statusCode: undefined, failed: record.errorCode !== undefined && ERROR_STATUS[record.errorCode] >= 500 }
  return { statusCode: response.statusCode, failed: response.statusCode >= 500 || record.brokenOffStatus !== undefined }
}

/** The last `Host` read and what it gave: a gateway's clients mostly name it one way (a regex per sampled request otherwise). */
let lastHost: { host: string; protocol: 'http' | 'https'; server: { address: string; port: number } | undefined } | undefined

/** `server.address` and `server.port` from a checked `Host` (`name`, `name:port`, `[v6]:port`). */
function hostOf(host: string | undefined, protocol: 'http' | 'https'): { address: string; port: number } | undefined {
  if (host === undefined || host === '') return undefined
  if (lastHost !== undefined && lastHost.host === host && lastHost.protocol === protocol) return lastHost.server
  const server = parseHost(host, protocol)
  lastHost = { host, protocol, server }
  return server
}

function parseHost(host: string, protocol: 'http' | 'https'): { address: string; port: number } | undefined {
  const match = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(host)
  if (match === null) return undefined
  const address = (match[1] as string).replace(/^\[|\]$/g, '')
  const port = match[2] === undefined || match[2] === '' ? (protocol === 'https' ? 443 : 80) : Number(match[2])
  return { address, port }
}
