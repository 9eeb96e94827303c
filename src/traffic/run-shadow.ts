import { hash } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { buildErrorBody } from '../errors/error-body.js'
import { GatewayError, isGatewayError } from '../errors/registry.js'
import type { ShadowOutcome, ShadowRecord, ShadowResults } from '../fleet/shadow-results.js'
import { EVERY_CREDENTIAL_SOURCE, everyPresentedToken, looksLikeServiceKey } from '../credentials/index.js'
import type { Exchange } from '../kernel/exchange.js'
import type { RequestHead } from '../kernel/request-head.js'
import type { LegacyCalls, V4Call } from '../legacy/legacy-calls.js'
import { credentialHeaders } from '../legacy/prepare-legacy-call.js'
import { runLegacyCalls, UnusableSessionIdError, type LegacyCallTrace } from '../legacy/run-legacy-call.js'
import { shapeLegacyResponse } from '../legacy/shape-response.js'
import type { StreamTap } from '../passthrough/forward-stream.js'
import type { CallsPlan, IdempotentPlan, RefusePlan, StreamPlan } from '../plan/plan-request.js'
import { createSessionMap, type SessionMap } from '../sessions/session-map.js'
import { createMemorySessionStore } from '../sessions/session-store.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import { shadowPolicyFor, type ShadowPolicy } from '../tenancy/shadow-policy.js'
import type { RequestSpan } from '../tracing/request-span.js'
import { upstreamFailureCause } from '../upstream/map-upstream-error.js'
import { AnswerTooLargeError, type CancelScope, type UpstreamClient, type UpstreamResponse } from '../upstream/upstream-client.js'
import { compareAnswers, type ComparedAnswer, type CredentialTest } from '../util/shadow-compare.js'
import { decodedContent } from './shadow-content.js'
import { shadowCallNames } from './traced-requests.js'

/** What the planner answers for the candidate: stage `translate`'s plan of the same head and body, against `origin` (plan/shadow-candidate.ts). */
export type PlanCandidate = (runtime: GatewayRuntime, head: RequestHead, body: Buffer, origin: string) => RefusePlan | CallsPlan | IdempotentPlan

export interface ShadowRunnerDeps {
  upstream: UpstreamClient
  results: ShadowResults
  planCandidate: PlanCandidate
  /** The state key of a session-execute request the candidate refuses, where the request shows one (plan/shadow-candidate.ts). */
  refusedStateKey: (runtime: GatewayRuntime, head: RequestHead, body: Buffer) => string | undefined
  /** The runtime now: a comparison whose route a reload removed is discarded (SPEC 17). */
  currentRuntime?: () => GatewayRuntime
  /**
   * SPEC 17: a comparison's V4 call that got no answer, an upstream failure labelled `shadow`,
   * counted once per failed call, whether or not its comparison is still counted after a reload.
   */
  onUpstreamFailure?: (tenant: string, cause: string) => void
}

export interface ShadowRunner {
  /**
   * A request that `upstream.legacy` serves in stage `shadow` (SPEC 15): decides whether it is
   * compared (eligible, sampled, under the caps) and, if so, returns the tap that copies its
   * request and the legacy answer as they stream; the comparison starts once the answer is sent.
   */
  begin(runtime: GatewayRuntime, exchange: Exchange, plan: StreamPlan): StreamTap | undefined
  /** Comparisons under way on this replica (all tenants). */
  inFlight(): number
  /** Shutdown: every comparison still running is cut and counted `abandoned`; nothing waits for them. */
  abandonAll(): void
}

/** SPEC 15's V4 calls carry this header, so the backend can tell a comparison from a client. */
const SHADOW_HEADER = 'x-v4gw-shadow'

/**
 * SPEC 15's comparisons, run beside the client's path and never on it: the client's answer is
 * the legacy upstream's, streamed as in stage `legacy`; the tap only copies bytes (up to
 * `maxBodyBytes`), and the candidate is planned and called after the answer has been sent.
 * Bounded by `maxInFlight` per tenant and `limits.shadowInFlight` for the replica: past them a
 * comparison is dropped, never queued. Shadow session-execute uses a session map of its own per
 * tenant and shadow origin (`maxSessions`), dropped when no route names that origin any more.
 */
export function createShadowRunner(deps: ShadowRunnerDeps): ShadowRunner {
  const running = new Set<Comparison>()
  const perTenant = new Map<string, number>()
  // Per tenant and shadow origin: routes of one tenant may name different shadow upstreams.
  const sessionMaps = new Map<string, { maxSessions: number; map: SessionMap<UpstreamResponse> }>()
  let mapsPrunedFor: GatewayRuntime | undefined
  // `sessions.ttlMs` is restart-only (SPEC 8): the shadow maps keep the one the process started with, as the clients' map does.
  const startTtlMs = deps.currentRuntime?.().config.sessions.ttlMs

  function sessionsFor(comparison: Comparison): SessionMap<UpstreamResponse> {
    const { tenant, policy, runtime } = comparison
    const now = deps.currentRuntime?.() ?? runtime
    if (now !== mapsPrunedFor) {
      mapsPrunedFor = now
      pruneSessionMaps(now)
    }
    const key = `${tenant}\u0000${policy.origin}`
    const { maxSessions } = policy.settings
    const ttlMs = startTtlMs ?? runtime.config.sessions.ttlMs
    const current = sessionMaps.get(key)
    const newMap = (): SessionMap<UpstreamResponse> => createSessionMap<UpstreamResponse>(createMemorySessionStore({ maxEntries: maxSessions, ttlMs }))
    // A comparison begun before a reload uses the map in effect, or one of its own: it never
    // replaces the map of the runtime now in effect, nor brings back one a reload let go.
    if (now !== runtime) return current?.map ?? newMap()
    if (current !== undefined && current.maxSessions === maxSessions) return current.map
    const map = newMap()
    sessionMaps.set(key, { maxSessions, map })
    return map
  }

  /**
   * SPEC 15: a shadow origin the runtime now in effect no longer names loses its entries, as the
   * client map's do on a reload; checked at the first comparison under each new runtime.
   */
  function pruneSessionMaps(now: GatewayRuntime): void {
    const kept = shadowOriginsOf(now)
    for (const key of sessionMaps.keys()) if (!kept.has(key)) sessionMaps.delete(key)
  }

  /** Counts a comparison's end, unless it was abandoned or a reload took its route away. */
  function record(comparison: Comparison, result: ShadowRecord): void {
    comparison.finished = true
    if (comparison.abandoned || !routeStands(comparison)) return
    deps.results.record(result)
  }

  /** SPEC 17: a comparison whose route a reload removed is discarded, its series not brought back. */
  function routeStands(comparison: Comparison): boolean {
    const now = deps.currentRuntime?.()
    return now === undefined || now === comparison.runtime || now.tenancy.tenants.get(comparison.tenant)?.routes.some((route) => route.label === comparison.route) === true
  }

  /**
   * A comparison let go at `timeoutMs` while its V4 call still connects (undici cuts a call only
   * once connected) keeps its slot until that call ends: the caps bound the V4 work outstanding,
   * sockets included, not only the comparisons still waiting for an outcome.
   */
  function releaseOnceCallsEnd(comparison: Comparison): void {
    if (comparison.callsEnded === undefined) release(comparison)
    else void comparison.callsEnded.then(() => release(comparison))
  }

  function release(comparison: Comparison): void {
    if (!running.delete(comparison)) return
    const left = (perTenant.get(comparison.tenant) ?? 1) - 1
    if (left === 0) perTenant.delete(comparison.tenant)
    else perTenant.set(comparison.tenant, left)
  }

  function begin(runtime: GatewayRuntime, exchange: Exchange, plan: StreamPlan): StreamTap | undefined {
    const { facts } = plan
    const tenantName = facts.tenant
    const route = facts.legacyRoute
    if (tenantName === undefined || route === undefined || (facts.action !== 'execute' && facts.action !== 'session-execute')) return undefined
    const tenant = runtime.tenancy.tenants.get(tenantName)
    if (tenant === undefined) return undefined
    const policy = shadowPolicyFor(runtime, tenant, route)
    const head = exchange.head
    const note = (outcome: ShadowOutcome): undefined => {
      deps.results.record({ tenant: tenantName, route, outcome, requestId: head.requestId, atMs: Date.now() })
      return undefined
    }
    // A route sampled at 0 % compares nothing: no slot, no copy of its body (a session-execute
    // request would otherwise hold one until its body came, crowding out other routes' comparisons).
    if (policy.sampleBound === 0) return undefined
    const declared = Number(head.headers['content-length'])
    const oversized = Number.isFinite(declared) && declared > policy.settings.maxBodyBytes
    const full = (perTenant.get(tenantName) ?? 0) >= policy.settings.maxInFlight || running.size >= runtime.config.limits.shadowInFlight
    if (facts.action === 'execute') {
      // Sampled by request id, known now.
      if (!sampled(policy, tenantName, head.requestId)) return undefined
      if (!policy.mayForwardCredentials || oversized) return note('skipped')
      if (full) return note('dropped')
    } else if (oversized || full) {
      // Sampled by state, which the body holds: nothing is counted before the body has come in
      // whole and the state is known (SPEC 15: a state is compared on every request or on none).
      // One whose state cannot be known within the limits (a body over maxBodyBytes, or caps
      // already full, where its body is not copied) is not compared, and counted only where every
      // state is sampled (percent 100), so that the count is never a guess (docs/decisions.md).
      if (policy.sampleBound < EVERY_KEY) return undefined
      if (!policy.mayForwardCredentials || oversized) return note('skipped')
      return note('dropped')
    }
    const comparison = new Comparison(tenantName, route, facts.action, facts.clientId ?? 'anonymous', policy, runtime, head, exchange.span)
    if (facts.action === 'session-execute') {
      comparison.onBodyEnd = () => {
        const body = comparison.requestBody()
        const planned = deps.planCandidate(runtime, head, body, policy.origin)
        // A refused request's state is read (a second parse) only where sampling depends on it: not at 0 % or 100 %.
        const readsState = planned.kind === 'refuse' && policy.sampleBound > 0 && policy.sampleBound < EVERY_KEY
        const verdict = comparison.settleSampling(planned, readsState ? deps.refusedStateKey(runtime, head, body) : undefined)
        if (verdict === 'compare') return
        release(comparison)
        if (verdict === 'skipped') record(comparison, comparison.recordOf('skipped'))
      }
    }
    running.add(comparison)
    perTenant.set(tenantName, (perTenant.get(tenantName) ?? 0) + 1)
    exchange.response.once('close', function compareOnceAnswered() {
      if (comparison.settled !== 'compare') {
        release(comparison)
        // A session-execute request whose state never became known (its body over maxBodyBytes
        // as it came, or answered before it came whole) is as one declared over the limit: not
        // compared, counted only where every state is sampled. One not sampled counts nowhere.
        if (comparison.settled === undefined && policy.sampleBound >= EVERY_KEY) record(comparison, comparison.recordOf('skipped'))
        return
      }
      // The legacy answer has gone out whole (or failed): the V4 side starts only now, off the client's path.
      // A request whose body had not come in whole (answered before it ended) is not what translate
      // would have read: not compared (skipped). A legacy side that gave no answer is primary_error
      // all the same (a refused connection fails before the body is in), unless the client left.
      const answered = comparison.primaryAnswer(exchange.response.writableFinished)
      const primary = exchange.request.complete || (answered === 'primary_error' && !exchange.clientGone) ? answered : 'skipped'
      if (primary === 'skipped' || primary === 'primary_error') {
        release(comparison)
        record(comparison, comparison.recordOf(primary))
        return
      }
      setImmediate(() => {
        runCandidate(comparison, primary).then(
          (result) => {
            if (result !== undefined) record(comparison, result)
            releaseOnceCallsEnd(comparison)
          },
          () => releaseOnceCallsEnd(comparison)
        )
      })
    })
    return comparison.tap
  }

  async function runCandidate(comparison: Comparison, primary: ComparedAnswer): Promise<ShadowRecord | undefined> {
    const { policy, runtime, head } = comparison
    if (comparison.abandoned) return undefined
    const planned = comparison.planned ?? deps.planCandidate(runtime, head, comparison.requestBody(), policy.origin)
    let candidate: ComparedAnswer
    if (planned.kind === 'refuse') {
      // The gateway's own refusal, shaped as SPEC 6 shapes it: no V4 call.
      candidate = gatewayAnswer(planned.error, head.requestId)
    } else {
      const calls = planned.kind === 'idempotent' ? planned.calls : planned
      let timedOut = false
      let endWait: ((error: GatewayError) => void) | undefined
      // SPEC 15: timeoutMs is the V4 side's own limit. A call is cut where undici lets it be (once
      // connected); one still connecting, or waiting on another comparison's sessions.start, is
      // let go here and ends on its own (its connect timeout at the latest), its slot held until
      // then (releaseOnceCallsEnd).
      const waitEnds = new Promise<never>((_resolve, reject) => {
        endWait = reject
      })
      const timer = setTimeout(() => {
        timedOut = true
        comparison.cancelCalls()
        endWait?.(new GatewayError('UPSTREAM_TIMEOUT', 'the shadow upstream did not answer within shadow.timeoutMs'))
      }, policy.settings.timeoutMs)
      timer.unref()
      const trace: LegacyCallTrace = { upstreamMs: undefined, v4Path: undefined, sessionOutcome: undefined }
      try {
        const calling = runLegacyCalls(
          markedShadow(calls.calls),
          {
            origin: policy.origin,
            timeoutMs: policy.settings.timeoutMs,
            cancelScope: comparison.scope,
            // Abandoned at shutdown and bounded by timeoutMs, the session's start included (SPEC 15).
            cancelsStart: true,
            // A larger answer is not compared (SPEC 15: skipped), and not held whole first.
            maxAnswerBytes: policy.settings.maxBodyBytes,
            trace,
            // With tracing on, each V4 call of the comparison is a CLIENT span of its own (SPEC 17).
            tracer: comparison.span?.callTracer(() => shadowCallNames(runtime))
          },
          {
            upstream: deps.upstream,
            sessions: sessionsFor(comparison)
          }
        )
        // Let go at the timeout, its own end matters only to the slot it holds.
        comparison.callsEnded = calling.then(noop, noop)
        const result = await Promise.race([calling, waitEnds])
        const shaped = shapeLegacyResponse(result.response.statusCode, result.response.headers, result.response.body, { requestId: head.requestId, totalMs: 0, sessionId: result.sessionId, responseFields: calls.responseFields })
        candidate = {
          statusCode: shaped.statusCode,
          contentType: headerText(shaped.headers['content-type']),
          contentEncoding: headerText(shaped.headers['content-encoding']),
          body: typeof shaped.payload === 'string' ? Buffer.from(shaped.payload) : shaped.payload
        }
      } catch (error) {
        if (comparison.abandoned) return undefined
        if (error instanceof AnswerTooLargeError) return comparison.recordOf('skipped', primary)
        if (error instanceof UnusableSessionIdError) {
          // V4 answered, in JSON, without a session id translate could use: its 502 is the candidate (SPEC 15: any HTTP answer is compared).
          candidate = gatewayAnswer(error, head.requestId)
        } else if (isGatewayError(error)) {
          // No HTTP answer from V4 (refused, reset, timeout, unreadable): SPEC 15's candidate_error.
          // One failed call counts once (SPEC 17): a comparison that waited on another's sessions.start
          // does not count it again, even when its own timer fired while it waited.
          const failureCause = trace.failedStart === 'shared' || (timedOut && trace.waitsOnSharedStart === true) ? undefined : timedOut ? 'timeout' : upstreamFailureCause(error)
          // The call was made and failed: counted while its tenant is configured (a reload that
          // removed only the route discards the comparison, not the failure).
          if (failureCause !== undefined && (deps.currentRuntime?.() ?? runtime).tenancy.tenants.has(comparison.tenant)) deps.onUpstreamFailure?.(comparison.tenant, failureCause)
          return comparison.recordOf('candidate_error', primary)
        } else throw error
      } finally {
        clearTimeout(timer)
      }
    }
    if (comparison.abandoned) return undefined
    const [primaryContent, candidateContent] = await Promise.all([decodedContent(primary, policy.settings.maxBodyBytes), decodedContent(candidate, policy.settings.maxBodyBytes)])
    if (comparison.abandoned) return undefined
    if (primaryContent === 'skipped' || candidateContent === 'skipped') return comparison.recordOf('skipped', primary)
    const pointers = compareAnswers(primaryContent, candidateContent, policy.ignore, credentialTest(runtime, head))
    return comparison.recordOf(pointers.length === 0 ? 'match' : 'mismatch', primary, candidate.statusCode, pointers)
  }

  return {
    begin,
    inFlight: () => running.size,
    abandonAll() {
      for (const comparison of [...running]) {
        comparison.abandon()
        release(comparison)
        // One whose state's sampling is not settled yet was never a comparison; one that has its
        // outcome (let go at its timeout, its call still connecting) is counted already.
        if (comparison.settled === 'compare' && !comparison.finished && routeStands(comparison)) deps.results.record(comparison.recordOf('abandoned'))
      }
    }
  }
}

function noop(): void {}

/** One comparison: the copies of the request and of the legacy answer, and the V4 side's cancel scope. */
class Comparison {
  readonly scope: CancelScope = { cancelled: false, cancel: undefined }
  abandoned = false
  /** Its outcome is recorded (or discarded): nothing more is counted of it. */
  finished = false
  /** Settles when its V4 calls have ended, however they end; undefined when it made none. */
  callsEnded: Promise<void> | undefined = undefined
  /**
   * Whether it is compared: execute's is decided at its start; session-execute's once its body is
   * in (settleSampling), until then undefined. `skipped`: sampled, but its credentials may not go to V4.
   */
  settled: 'compare' | 'unsampled' | 'skipped' | undefined
  /** Session-execute: the candidate's plan, made when the body came in to read its state. */
  planned: ReturnType<PlanCandidate> | undefined
  /** Session-execute: called once the request's body has come in whole. */
  onBodyEnd: (() => void) | undefined
  #requestChunks: Buffer[] = []
  #requestBytes = 0
  #answerChunks: Buffer[] = []
  #answerBytes = 0
  #tooLarge = false
  #status: number | undefined
  #contentType: string | undefined
  #contentEncoding: string | undefined
  readonly tap: StreamTap

  constructor(
    readonly tenant: string,
    readonly route: string,
    readonly action: 'execute' | 'session-execute',
    readonly clientId: string,
    readonly policy: ShadowPolicy,
    readonly runtime: GatewayRuntime,
    readonly head: RequestHead,
    /** SPEC 17: the request's SERVER span with tracing on; the comparison's calls are its CLIENT spans. */
    readonly span: RequestSpan | undefined
  ) {
    this.settled = action === 'execute' ? 'compare' : undefined
    const limit = policy.settings.maxBodyBytes
    this.tap = {
      onRequestChunk: (chunk) => {
        if (this.#tooLarge) return
        this.#requestBytes += chunk.length
        if (this.#requestBytes > limit) return this.#drop()
        this.#requestChunks.push(chunk)
      },
      onRequestEnd: () => {
        // A body over maxBodyBytes leaves its state unknown: left open, counted nowhere.
        if (this.#tooLarge) return
        try {
          this.onBodyEnd?.()
        } catch {
          // On the client's stream: nothing of the comparison may fail it. Not compared.
          this.settled = 'unsampled'
          this.#drop()
        }
      },
      onResponseStart: (statusCode, headers) => {
        this.#status = statusCode
        this.#contentType = headerText(headers['content-type'])
        this.#contentEncoding = headerText(headers['content-encoding'])
      },
      onResponseChunk: (chunk) => {
        if (this.#tooLarge) return
        this.#answerBytes += chunk.length
        if (this.#answerBytes > limit) return this.#drop()
        this.#answerChunks.push(chunk)
      }
    }
  }

  /**
   * SPEC 15's sampling of a session-execute request, from the candidate's plan of its body: by
   * (client id, state key), the state key of a refused request included where it shows one
   * (`refusedStateKey`), so a state is compared on every request or on none; by request id for a
   * refused request that shows none. Not compared: its copies go at once and it taps no more.
   */
  settleSampling(planned: ReturnType<PlanCandidate>, refusedStateKey: string | undefined): 'compare' | 'unsampled' | 'skipped' {
    const calls = planned.kind === 'refuse' ? undefined : planned.kind === 'idempotent' ? planned.calls.calls : planned.calls
    const stateKey = calls?.action === 'session-execute' ? calls.stateKey : refusedStateKey
    const key = stateKey !== undefined ? `${this.clientId}\u0000${stateKey}` : this.head.requestId
    this.settled = !sampled(this.policy, this.tenant, key) ? 'unsampled' : this.policy.mayForwardCredentials ? 'compare' : 'skipped'
    if (this.settled === 'compare') this.planned = planned
    else this.#drop()
    return this.settled
  }

  /** A request or answer over `maxBodyBytes` is not compared (SPEC 15: skipped); its copies go at once. */
  #drop(): void {
    this.#tooLarge = true
    this.#requestChunks = []
    this.#answerChunks = []
  }

  /** The legacy answer as compared, once the client's response has closed. */
  primaryAnswer(finished: boolean): ComparedAnswer | 'skipped' | 'primary_error' {
    if (this.#tooLarge) return 'skipped'
    if (this.#status === undefined || !finished) return 'primary_error'
    return { statusCode: this.#status, contentType: this.#contentType, contentEncoding: this.#contentEncoding, body: Buffer.concat(this.#answerChunks, this.#answerBytes) }
  }

  requestBody(): Buffer {
    return Buffer.concat(this.#requestChunks, this.#requestBytes)
  }

  cancelCalls(): void {
    this.scope.cancelled = true
    this.scope.cancel?.()
  }

  abandon(): void {
    this.abandoned = true
    this.cancelCalls()
  }

  recordOf(outcome: ShadowOutcome, primary?: ComparedAnswer, candidateStatus?: number, pointers?: readonly string[]): ShadowRecord {
    return { tenant: this.tenant, route: this.route, outcome, requestId: this.head.requestId, atMs: Date.now(), primaryStatus: primary?.statusCode ?? this.#status, candidateStatus, pointers }
  }
}

const shadowOrigins = new WeakMap<GatewayRuntime, ReadonlySet<string>>()

/** `tenant\0origin` of every shadow upstream a session-execute route of the runtime may compare against. */
function shadowOriginsOf(runtime: GatewayRuntime): ReadonlySet<string> {
  let origins = shadowOrigins.get(runtime)
  if (origins === undefined) {
    const found = new Set<string>()
    for (const tenant of runtime.tenancy.tenants.values()) {
      for (const route of tenant.routes) if (route.action === 'session-execute') found.add(`${tenant.name}\u0000${shadowPolicyFor(runtime, tenant, route.label).origin}`)
    }
    origins = found
    shadowOrigins.set(runtime, origins)
  }
  return origins
}

/** `percent × 100` at 100 %: every key is sampled. */
const EVERY_KEY = 10_000

/** SPEC 15's sampling: `(first 8 bytes of SHA-256("shadow\0" + tenant + "\0" + key)) mod 10000` below `percent × 100`. */
function sampled(policy: ShadowPolicy, tenant: string, key: string): boolean {
  if (policy.sampleBound >= EVERY_KEY) return true
  if (policy.sampleBound <= 0) return false
  const digest = hash('sha256', `shadow\u0000${tenant}\u0000${key}`, 'hex')
  return Number(BigInt(`0x${digest.slice(0, 16)}`) % 10_000n) < policy.sampleBound
}

/** The gateway's own answer to a request, as SPEC 6 shapes it: what translate would send the client. */
function gatewayAnswer(error: GatewayError, requestId: string): ComparedAnswer {
  return { statusCode: error.statusCode, contentType: 'application/json', body: Buffer.from(JSON.stringify(buildErrorBody(error, requestId, 0))) }
}

/** The same calls with `x-v4gw-shadow: 1` on each (SPEC 15). */
function markedShadow(calls: LegacyCalls): LegacyCalls {
  if (calls.action === 'execute') return { ...calls, execution: shadowMarked(calls.execution) }
  // Each call marked as it is made: the start call is made only on a session-map miss.
  return { ...calls, start: () => shadowMarked(calls.start()), execution: (sessionId) => shadowMarked(calls.execution(sessionId)) }
}

function shadowMarked(call: V4Call): V4Call {
  return { ...call, headers: { ...call.headers, [SHADOW_HEADER]: '1' } }
}

function headerText(value: IncomingHttpHeaders[string] | string[] | string | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value
}

/**
 * SPEC 15 "no credential is kept": a member name that reads as a service key
 * (credentials/credentials-in-text.ts) or is a token this request presented, used by an answer
 * as a map key, is hashed in a recorded pointer even when it is plain. Every token counts, in
 * any of SPEC 5's headers or the query: the legacy upstream got them all as sent (SPEC 14), and
 * two that conflict still reach a comparison (the candidate's 400). They are read only when a
 * pointer is recorded: a comparison that matches never reads them.
 */
function credentialTest(runtime: GatewayRuntime, head: RequestHead): CredentialTest {
  const { serviceKeyPrefix, queryParam } = runtime.config.credentials
  let tokens: Set<string> | undefined
  const presented = (): Set<string> => {
    const queryAt = head.url.indexOf('?')
    const query = queryParam !== null && queryAt !== -1 ? new URLSearchParams(head.url.slice(queryAt + 1)) : null
    return everyPresentedToken(credentialHeaders(head.rawHeaders, EVERY_CREDENTIAL_SOURCE), query, runtime.config.credentials)
  }
  return (name) => {
    if (looksLikeServiceKey(name, serviceKeyPrefix)) return true
    tokens ??= presented()
    return tokens.has(name)
  }
}
