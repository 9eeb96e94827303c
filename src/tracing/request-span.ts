import { SpanKind, TraceFlags, type Attributes, type Link, type SpanContext } from '@opentelemetry/api'
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_METHOD_ORIGINAL,
  ATTR_HTTP_REQUEST_RESEND_COUNT,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_QUERY,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL
} from '@opentelemetry/semantic-conventions'
import type { CallTracer, TracedCall, UpstreamRequest } from '../upstream/upstream-client.js'
import { attributeText, clockOffset, EndedSpan, type SpanRecorder } from './ended-span.js'
import { safeQuery } from './safe-query.js'

/**
 * What the SERVER span of a request says once it has ended (SPEC 17): the stable HTTP
 * semantic-convention attributes and the gateway's own `v4gw.*`, from the request's plan facts
 * and access record. Plain values; none of them is a credential, a fingerprint or a header
 * other than the user agent.
 */
export interface ServerSpanFacts {
  /** `METHOD /route-template` for a legacy route, `METHOD /v4/*` for native traffic, else the method alone. */
  readonly name: string
  /** `http.route`: the template the name ends with, when there is one. */
  readonly route: string | undefined
  /**
   * The status the client was sent; none when nothing was (a client that left first: its access
   * line's 499 is the log's word, not an HTTP status the semantic conventions record).
   */
  readonly statusCode: number | undefined
  /**
   * The request failed on the gateway's side (semantic conventions: the SERVER span's status is
   * an error): a 5xx sent, an answer whose body was cut after its head went, or a failure before
   * anything was sent. A 4xx is the client's.
   */
  readonly failed: boolean
  /** The gateway's error code, when it answered one or an upstream call failed. */
  readonly errorCode: string | undefined
  readonly scheme: string
  readonly path: string | undefined
  /** The query as sent (without its `?`); the query credential (SPEC 5) is removed before it is recorded. */
  readonly rawQuery: string
  readonly httpVersion: string
  /** From the `Host` the kernel checked; undefined for a request refused before that. */
  readonly serverAddress: string | undefined
  readonly serverPort: number | undefined
  readonly clientAddress: string | undefined
  readonly userAgent: string | undefined
  readonly tenant: string | undefined
  readonly trafficClass: string | undefined
  readonly legacyRoute: string | undefined
  readonly sessionOutcome: string | undefined
  /** `session`, `service-key`, `service-account-id` or `none`: the kind, never a value or a fingerprint. */
  readonly credentialType: string | undefined
  readonly migrationStage: string | undefined
  readonly servedBy: string | undefined
  readonly deprecationAction: string | undefined
  readonly idempotencyOutcome: string | undefined
}

/** One upstream call about to go out (SPEC 17's CLIENT span). */
export interface ClientCallStart {
  /** `POST /v4/sessions.start`, `POST /v4/sessions/{sessionId}/executions.execute`, `GET /v4/*`, … */
  readonly name: string
  readonly method: string
  /** scheme://host:port of the upstream. */
  readonly origin: string
  /** Path and query as they go on the request line. */
  readonly target: string
  /** The query parameter that carries a credential (SPEC 5), removed from `url.full`. */
  readonly queryCredential: string | null
  /** `http.request.resend_count`: set on the execution sent again after a stale session (SPEC 4 step 5). */
  readonly resendCount?: number | undefined
  /** SPEC 15: a shadow comparison's call. */
  readonly shadow?: boolean | undefined
}

/** How a recorded request names its calls (SPEC 17): the template of a buffered call, and that of its streamed one. */
export interface CallNames {
  /** A buffered call (a V4 call of a legacy request): its name and, for an execution sent again, its resend count. */
  buffered(request: UpstreamRequest): { name: string; resendCount?: number | undefined }
  /** The request's streamed call (native, proxy route, legacy upstream). */
  streamed(): string
  /** SPEC 5's query credential parameter, never recorded. */
  readonly queryCredential: string | null
  /**
   * SPEC 15: the calls are a comparison's (SPEC 17: `v4gw.shadow: true`). Known from who makes
   * them, never read from their `x-v4gw-shadow`: a client's own header travels on native traffic.
   */
  readonly shadow: boolean
}

/**
 * A request's SERVER span and the CLIENT spans of its upstream calls (SPEC 17), kept on its
 * Exchange from its start to its end. A call's span is a child of this one, and its
 * `traceparent` names that call.
 */
export interface RequestSpan {
  /** The trace the request is in (the gateway's own unless the client's was trusted), for its access line. */
  readonly traceId: string
  readonly spanId: string
  /** Sampled: its attributes are recorded and it is exported. An unsampled span still has ids, which the upstream calls carry. */
  readonly recording: boolean
  /**
   * What traces the request's upstream calls (the upstream client asks it per call): `names` is
   * asked only by a recording span, the one whose calls are named.
   */
  callTracer(names: () => CallNames): CallTracer
  /**
   * Ends the request's span, and any call span still open, at `endedAt` (`performance.now()`).
   * `facts` only for a recording span: an unsampled request builds none (most of them, at 0.01).
   */
  end(facts: ServerSpanFacts | undefined, endedAt: number): void
}

/**
 * A sampled request: its SERVER span and its calls' CLIENT spans, recorded as plain facts and
 * handed to the export queue as each ends (ended-span.ts: not the SDK's span objects).
 */
export class RecordedRequestSpan implements RequestSpan {
  readonly recording = true
  readonly spanId: string
  readonly context: SpanContext
  /** clockOffset() at the start: the request's spans share it, so that their times line up. */
  readonly offset = clockOffset()
  /** Calls whose span was not ended by an answer (a streamed body still flowing): ended with the request. */
  private open: RecordedCallSpan[] | undefined = undefined
  private ended = false

  constructor(
    readonly recorder: SpanRecorder,
    readonly traceId: string,
    /** The trusted client's context (SPEC 17 `trustIncoming`), else none: a new root. */
    private readonly parent: SpanContext | undefined,
    /** The untrusted client's context, as a link. */
    private readonly links: Link[] | undefined,
    private readonly method: string,
    private readonly startedAt: number,
    /**
     * SPEC 5's query credential parameter under the config the request started with (SPEC 8: it
     * finishes under that config), removed from `url.query` whenever the span ends.
     */
    private readonly queryCredential: string | null
  ) {
    this.spanId = recorder.newSpanId()
    this.context = { traceId, spanId: this.spanId, traceFlags: TraceFlags.SAMPLED }
  }

  callTracer(names: () => CallNames): CallTracer {
    return new NamedCalls(this, names())
  }

  startCall(call: ClientCallStart, streamed: boolean): RecordedCallSpan {
    const started = new RecordedCallSpan(this, call.name, clientAttributes(call), performance.now(), streamed)
    ;(this.open ??= []).push(started)
    return started
  }

  end(facts: ServerSpanFacts | undefined, endedAt: number): void {
    // Recorded once, as the SDK's span ends once.
    if (this.ended) return
    this.ended = true
    // A streamed call ends with its request (its body done); a buffered one ends when its answer
    // is read or it fails, which a call that outlives its request's client (a shared
    // `sessions.start`, SPEC 4 step 3) does after this: its span then says how it went.
    if (this.open !== undefined) for (const call of this.open) if (call.streamed) call.end(endedAt)
    this.recorder.record(
      new EndedSpan(this.recorder, {
        context: this.context,
        parent: this.parent,
        kind: SpanKind.SERVER,
        // Until its facts are known a SERVER span is named by its method (SPEC 17).
        name: facts?.name ?? this.method,
        attributes: facts === undefined ? {} : serverAttributes(facts, this.queryCredential),
        links: this.links,
        error: facts?.failed === true,
        startedAt: this.startedAt,
        endedAt,
        offset: this.offset
      })
    )
  }
}

/** A recorded request's calls, each a CLIENT span named by the request's templates. */
class NamedCalls implements CallTracer {
  constructor(
    private readonly span: RecordedRequestSpan,
    private readonly names: CallNames
  ) {}

  traceCall(request: UpstreamRequest, streamed: boolean): TracedCall {
    const { name, resendCount } = streamed ? { name: this.names.streamed(), resendCount: undefined } : this.names.buffered(request)
    return this.span.startCall({ name, method: request.method, origin: request.origin, target: request.path, queryCredential: this.names.queryCredential, resendCount, shadow: this.names.shadow }, streamed)
  }
}

class RecordedCallSpan implements TracedCall {
  readonly traceparent: string
  private readonly spanId: string
  private error = false
  private ended = false

  constructor(
    private readonly request: RecordedRequestSpan,
    private readonly name: string,
    private readonly attributes: Attributes,
    private readonly startedAt: number,
    /** The request's streamed call (native, proxy route, legacy upstream): it ends with the request. */
    readonly streamed: boolean
  ) {
    this.spanId = request.recorder.newSpanId()
    this.traceparent = `00-${request.traceId}-${this.spanId}-01`
  }

  answered(statusCode: number): void {
    if (this.ended) return
    this.attributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = statusCode
    // Semantic conventions: a CLIENT span is an error for any 4xx or 5xx.
    if (statusCode >= 400) {
      this.attributes[ATTR_ERROR_TYPE] = String(statusCode)
      this.error = true
    }
  }

  failed(errorCode: string, endedAt: number): void {
    if (this.ended) return
    this.attributes[ATTR_ERROR_TYPE] = errorCode
    this.error = true
    this.end(endedAt)
  }

  end(endedAt: number): void {
    if (this.ended) return
    this.ended = true
    const request = this.request
    request.recorder.record(
      new EndedSpan(request.recorder, {
        context: { traceId: request.traceId, spanId: this.spanId, traceFlags: TraceFlags.SAMPLED },
        parent: request.context,
        kind: SpanKind.CLIENT,
        name: this.name,
        attributes: this.attributes,
        links: undefined,
        error: this.error,
        startedAt: this.startedAt,
        endedAt,
        offset: request.offset
      })
    )
  }
}

/**
 * An unsampled request (99 in 100 at the default ratio): only the ids the access line and the
 * upstream calls' `traceparent` carry, what the SDK's non-recording span would hold, without
 * its span and context objects per request (they made tracing at 0.01 cost a traced legacy
 * request about 10 % more CPU: bench:compare --pair, docs/performance.md). Nothing of it is
 * recorded or exported, so it has nothing to end; it traces its calls itself, with nothing to name.
 */
export class UnrecordedRequestSpan implements RequestSpan, CallTracer {
  readonly recording = false

  constructor(
    readonly traceId: string,
    readonly spanId: string,
    private readonly newSpanId: () => string
  ) {}

  callTracer(): CallTracer {
    return this
  }

  traceCall(): TracedCall {
    return new UnrecordedCallSpan(`00-${this.traceId}-${this.newSpanId()}-00`)
  }

  end(): void {}
}

class UnrecordedCallSpan implements TracedCall {
  constructor(readonly traceparent: string) {}
  answered(): void {}
  failed(): void {}
  end(): void {}
}

/** RFC 9110 9.1's methods and PATCH (RFC 5789): the semantic conventions' known methods. */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH'])

function methodAttributes(method: string, attributes: Attributes): void {
  if (KNOWN_METHODS.has(method)) attributes[ATTR_HTTP_REQUEST_METHOD] = method
  else {
    attributes[ATTR_HTTP_REQUEST_METHOD] = '_OTHER'
    attributes[ATTR_HTTP_REQUEST_METHOD_ORIGINAL] = method
  }
}

/** An upstream origin as `server.*` name it: parsed once per origin (the config's few), not per call. */
const ORIGINS = new Map<string, { origin: string; address: string; port: number }>()

function originOf(text: string): { origin: string; address: string; port: number } {
  let known = ORIGINS.get(text)
  if (known === undefined) {
    const url = new URL(text)
    known = { origin: url.origin, address: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname, port: url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port) }
    // Bounded by the upstreams of the configs the process has run (reloads add a few).
    if (ORIGINS.size < 1_000) ORIGINS.set(text, known)
  }
  return known
}

function clientAttributes(call: ClientCallStart): Attributes {
  const attributes: Attributes = {}
  methodAttributes(call.method, attributes)
  const origin = originOf(call.origin)
  attributes[ATTR_SERVER_ADDRESS] = origin.address
  attributes[ATTR_SERVER_PORT] = origin.port
  const queryAt = call.target.indexOf('?')
  const path = queryAt === -1 ? call.target : call.target.slice(0, queryAt)
  const query = queryAt === -1 ? '' : safeQuery(call.target.slice(queryAt + 1), call.queryCredential)
  attributes[ATTR_URL_FULL] = attributeText(`${origin.origin}${path}${query === '' ? '' : `?${query}`}`)
  if (call.resendCount !== undefined) attributes[ATTR_HTTP_REQUEST_RESEND_COUNT] = call.resendCount
  if (call.shadow === true) attributes['v4gw.shadow'] = true
  return attributes
}

function serverAttributes(facts: ServerSpanFacts, queryCredential: string | null): Attributes {
  const attributes: Attributes = {}
  methodAttributes(facts.name.split(' ', 1)[0] as string, attributes)
  attributes[ATTR_URL_SCHEME] = facts.scheme
  set(attributes, ATTR_URL_PATH, facts.path)
  const query = safeQuery(facts.rawQuery, queryCredential)
  if (query !== '') attributes[ATTR_URL_QUERY] = attributeText(query)
  set(attributes, ATTR_HTTP_ROUTE, facts.route)
  if (facts.statusCode !== undefined) attributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = facts.statusCode
  attributes[ATTR_NETWORK_PROTOCOL_VERSION] = facts.httpVersion
  set(attributes, ATTR_SERVER_ADDRESS, facts.serverAddress)
  if (facts.serverPort !== undefined) attributes[ATTR_SERVER_PORT] = facts.serverPort
  set(attributes, ATTR_CLIENT_ADDRESS, facts.clientAddress)
  set(attributes, ATTR_USER_AGENT_ORIGINAL, facts.userAgent)
  const errorType = facts.errorCode ?? (facts.statusCode !== undefined && facts.statusCode >= 500 ? String(facts.statusCode) : undefined)
  set(attributes, ATTR_ERROR_TYPE, errorType)
  set(attributes, 'v4gw.tenant', facts.tenant)
  set(attributes, 'v4gw.traffic_class', facts.trafficClass)
  set(attributes, 'v4gw.legacy.route', facts.legacyRoute)
  set(attributes, 'v4gw.session.outcome', facts.sessionOutcome)
  set(attributes, 'v4gw.credential.type', facts.credentialType)
  set(attributes, 'v4gw.migration.stage', facts.migrationStage)
  set(attributes, 'v4gw.served_by', facts.servedBy)
  set(attributes, 'v4gw.deprecation.action', facts.deprecationAction)
  set(attributes, 'v4gw.idempotency.outcome', facts.idempotencyOutcome)
  return attributes
}

function set(attributes: Attributes, key: string, value: string | undefined): void {
  if (value !== undefined) attributes[key] = attributeText(value)
}
