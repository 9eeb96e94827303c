import type { LegacyAction } from '../config/schema.js'
import { firstPresentedToken, removeQueryCredential, resolveClientId, resolveRuntimeAuthorization, rewriteProxyCredentialHeaders, type CredentialKind, type PresentedCredential } from '../credentials/index.js'
import { GatewayError, isGatewayError } from '../errors/registry.js'
import type { RequestHead } from '../kernel/request-head.js'
import { buildLegacyCalls, sessionExecutePath, V4_EXECUTE_PATH, V4_SESSIONS_START_PATH, type LegacyCalls } from '../legacy/legacy-calls.js'
import { authorizeRuntimeCall, credentialHeaders, parseRuntimeBody, readLegacyCredential } from '../legacy/prepare-legacy-call.js'
import { buildRewrittenPath, type RouteMatch } from '../legacy/route-table.js'
import { runtimeCallHeaders } from '../legacy/runtime-call-headers.js'
import type { TrafficClass } from '../observability/access-record.js'
import { passthroughHeaders, type StreamCall } from '../passthrough/forward-stream.js'
import { fingerprintToken } from '../sessions/session-key.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import type { TenantRuntime } from '../tenancy/tenant-runtime.js'
import { deprecationHeadersFor, type DeprecationPolicy } from '../tenancy/deprecation-policy.js'
import { resolveEffectiveStage, type EffectiveStage } from '../tenancy/migration-policy.js'
import { assertNotBlocked, classifyRequest } from './classify-request.js'
import { decideDeprecation, type DeprecationFacts } from './deprecation-step.js'
import { buildIdempotencyRequest, readIdempotencyKey, type IdempotencyRequest } from './idempotency-step.js'
import { cameThroughFleet, decideMigration, LOOP_DETECTED_MESSAGE, nativeOnlyRefusal, withVia, type MigrationFacts } from './migration-step.js'
import { parseRequestTarget } from './request-target.js'
import type { RequestTarget } from './request-target.js'

/**
 * What the planner learnt of a request, kept whether it is served or refused: the access line,
 * the metrics and the migration report read these (SPEC 9, 12), `explain` prints them.
 */
export interface PlanFacts {
  tenant: string | undefined
  /** The tenant asked for when it is not configured (TENANT_UNKNOWN). */
  requestedTenant: string | undefined
  trafficClass: TrafficClass | undefined
  /** `METHOD /path` of the legacy route matched. */
  legacyRoute: string | undefined
  action: LegacyAction | undefined
  /** The upstream path of a streamed call; a legacy runtime call's is known as its calls go. */
  v4Path: string | undefined
  /** SHA-256 of the presented credential (legacy routes); never the credential. */
  clientFingerprint: string | undefined
  /** SPEC 12's client id of a legacy request, from its tenant's `clients.key`; never a credential. */
  clientId: string | undefined
  /** SPEC 12's `lastSeenNonExempt`: the client had an exemption in force (SPEC 13) under the config the request was planned with. */
  clientExempt: boolean | undefined
  /** What kind of credential a legacy request presented (SPEC 5), once read. */
  credential: CredentialKind | 'none' | undefined
  /** SPEC 13 on a deprecated legacy route, once its credential is read. */
  deprecation: DeprecationFacts | undefined
  /** SPEC 14 on a legacy route: the effective stage, where it comes from, and the side that serves the request. */
  migration: MigrationFacts | undefined
}

interface PlanBase {
  readonly facts: Readonly<PlanFacts>
  /** Headers on whatever answer the request gets, the gateway's own errors included (SPEC 6). */
  readonly answerHeaders: Readonly<Record<string, string>>
}

/** The gateway answers by itself, without any upstream call. */
export interface RefusePlan extends PlanBase {
  readonly kind: 'refuse'
  readonly error: GatewayError
}

/**
 * One call streamed both ways (SPEC 7): native traffic, `fallback: proxy`, legacy `proxy` routes,
 * and any legacy route that `upstream.legacy` serves (SPEC 14: stages legacy, shadow, canary).
 */
export interface StreamPlan extends PlanBase {
  readonly kind: 'stream'
  readonly call: StreamCall
  /**
   * SPEC 15's seam: stage `shadow`, where the comparison with the V4 translation starts beside the
   * legacy call. Nothing starts it yet (the runner streams the legacy answer as in stage legacy).
   */
  readonly shadow?: true
}

/** A legacy runtime route: its body is read (at most `limitBytes`, SPEC 10), then planned. */
export interface ReadBodyPlan extends PlanBase {
  readonly kind: 'read-body'
  readonly limitBytes: number
  withBody(bytes: Buffer): RefusePlan | CallsPlan | IdempotentPlan
}

/** The V4 calls a legacy runtime request becomes (SPEC 4), and how its answer is shaped (SPEC 6). */
export interface CallsPlan extends PlanBase {
  readonly kind: 'calls'
  readonly origin: string
  readonly timeoutMs: number
  readonly calls: LegacyCalls
  readonly responseFields: TenantRuntime['responseFields']
  /** SPEC 13: the `Link` of an answer given in a session, whose successor-version names it; undefined without a deprecation. */
  readonly sessionLink: ((sessionId: string) => string | undefined) | undefined
}

/** SPEC 16: a translated request that carries an idempotency key: its calls run once per key, a retry gets the stored answer. */
export interface IdempotentPlan extends PlanBase {
  readonly kind: 'idempotent'
  readonly calls: CallsPlan
  readonly idempotency: IdempotencyRequest
}

export type Plan = RefusePlan | StreamPlan | ReadBodyPlan | CallsPlan | IdempotentPlan

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({})

/**
 * SPEC 2-6 as one pure function: what a request becomes, decided from the resolved runtime and
 * the request's head (no socket, no upstream). The traffic listener runs the plan; `explain`
 * prints the same plan. A new decision (SPEC 13-16) is one more step here and one more case in
 * the runner (traffic/run-plan.ts).
 */
/** What only `explain` asks of the planner. */
export interface PlanOptions {
  /** SPEC 14 `explain --client ID`: plan as if the request came from this client. */
  readonly clientId?: string | undefined
  /**
   * SPEC 15: plan the shadow candidate, what stage `translate` would do with this request, its V4
   * calls sent to `origin` (`shadow.upstream`).
   */
  readonly shadowCandidate?: { readonly origin: string } | undefined
}

const TRANSLATE_STAGE: EffectiveStage = Object.freeze({ stage: 'translate', source: 'config' })

function noFacts(): PlanFacts {
  return { tenant: undefined, requestedTenant: undefined, trafficClass: undefined, legacyRoute: undefined, action: undefined, v4Path: undefined, clientFingerprint: undefined, clientId: undefined, clientExempt: undefined, credential: undefined, deprecation: undefined, migration: undefined }
}

export function planRequest(runtime: GatewayRuntime, head: RequestHead, options?: PlanOptions): Plan {
  // SPEC 14: a request that carries this fleet's Via member went round; forwarding it again would
  // go round for good.
  if (cameThroughFleet(head.headers.via, runtime.viaReceivedBy)) return planRefusal(runtime, head, new GatewayError('LOOP_DETECTED', LOOP_DETECTED_MESSAGE), options?.clientId)
  const facts = noFacts()
  try {
    const classification = classifyRequest(runtime, head, facts)
    facts.trafficClass = classification.trafficClass
    const { tenant, target } = classification
    if (classification.trafficClass === 'legacy') return planLegacy(runtime, head, facts, tenant, classification.match, target, options?.clientId, options?.shadowCandidate?.origin)
    // Native traffic, or unknown traffic under `fallback: proxy`: the target as the client sent it
    // (SPEC 7: path and query unchanged; a bare "?" included).
    facts.v4Path = target.pathname
    return stream(facts, NO_HEADERS, {
      origin: tenant.upstreamOrigin,
      method: head.method,
      target: head.url,
      headers: streamHeaders(runtime, head),
      timeoutMs: runtime.config.limits.upstreamTimeoutMs
    })
  } catch (error) {
    return refuse(facts, NO_HEADERS, error)
  }
}

/**
 * A request refused before anything of it is decided (a loop; the kernel's draining and shedding):
 * the gateway's own answer, which on a legacy route still carries the route's deprecation headers
 * and who served it (SPEC 13: "whatever its status"; SPEC 14), its facts naming tenant, class and
 * route and client for the log, the metrics and the registry. Classifying costs a tenant lookup, a
 * route match and the client id, paid only by refused requests. One that cannot be classified is refused as it is.
 */
export function planRefusal(runtime: GatewayRuntime, head: RequestHead, error: GatewayError, clientIdGiven?: string): RefusePlan {
  const facts = noFacts()
  try {
    const classification = classifyRequest(runtime, head, facts)
    facts.trafficClass = classification.trafficClass
    if (classification.trafficClass === 'legacy') {
      const { route } = classification.match
      facts.legacyRoute = route.label
      facts.action = route.action
      // SPEC 12: the registry records a refused call under its client like any other.
      // `explain --client` names the client of a refused call too (SPEC 14).
      const { tenant } = classification
      const { clientId } = identifyClient(runtime, head, facts, tenant, classification.target, clientIdGiven)
      // SPEC 17: its line, span and metrics name the route's stage, and the deprecation headers its answer carries.
      const configured = tenant.migration.get(route.label) as NonNullable<ReturnType<TenantRuntime['migration']['get']>>
      const effective = resolveEffectiveStage(configured, tenant.legacyOrigin !== undefined, runtime.stageOverrides, tenant.name, route.label, head.now)
      const policy = tenant.deprecation.get(route.label) ?? null
      facts.migration = decideMigration(effective, configured, tenant.name, clientId, policy?.exemptUntilMs.get(clientId), head.now)
      if (policy !== null) facts.deprecation = { clientId, action: 'header' }
      const successorPath = route.action === 'proxy' ? buildRewrittenPath(route, classification.match.params, classification.match.undecodable) : successorBeforeSession(route.action)
      return refuse(facts, legacyAnswerHeaders(head, tenant, policy, successorPath), error)
    }
  } catch {
    // Whatever else is wrong with it, this is its answer.
  }
  return refuse(facts, NO_HEADERS, error)
}

/**
 * The headers of every answer to a legacy route, the gateway's own errors included (SPEC 6, 13):
 * its id and deprecation headers; on a tenant that uses stages, who served it (SPEC 14): the
 * gateway, until a side is chosen.
 */
function legacyAnswerHeaders(head: RequestHead, tenant: TenantRuntime, policy: DeprecationPolicy | null, successorPath: string | undefined): Record<string, string> {
  const answerHeaders: Record<string, string> = policy === null ? { 'x-request-id': head.requestId } : { 'x-request-id': head.requestId, ...deprecationHeadersFor(policy, successorPath) }
  if (tenant.usesStages) answerHeaders['x-v4gw-served-by'] = 'gateway'
  return answerHeaders
}

/** SPEC 7's headers of a streamed call, with this fleet's `Via` member (SPEC 14). */
function streamHeaders(runtime: GatewayRuntime, head: RequestHead): Record<string, string | string[] | undefined> {
  const headers = passthroughHeaders(head.headers, head.rawHeaders, head.clientAddress, head.protocol, head.requestId)
  headers.via = withVia(head.headers.via, runtime.via)
  return headers
}

/**
 * A path parameter the translation needs as text (a rewrite's segment, a state key) whose
 * percent-encoding is not UTF-8: 400, as a router refuses such a URL, after the credential's checks
 * (SPEC 5 first), and never sent on.
 */
function assertDecodableParams(match: RouteMatch, readsAll = false): void {
  const refused = match.undecodable?.find((name) => readsAll || match.route.readParams.has(name))
  if (refused !== undefined) throw new GatewayError('INVALID_REQUEST', `path parameter :${refused} is not percent-encoded UTF-8`)
}

/** SPEC 4-6 for a matched legacy route: its credential, then a proxy call or a body to read. */
function planLegacy(runtime: GatewayRuntime, head: RequestHead, facts: PlanFacts, tenant: TenantRuntime, match: RouteMatch, target: RequestTarget, clientIdGiven: string | undefined, candidateOrigin?: string): Plan {
  const { route } = match
  facts.legacyRoute = route.label
  facts.action = route.action
  const policy = tenant.deprecation.get(route.label) ?? null
  // SPEC 14's effective stage: one lookup and a compare in `translate` with no override.
  const configured = tenant.migration.get(route.label) as NonNullable<ReturnType<TenantRuntime['migration']['get']>>
  const effective = candidateOrigin !== undefined ? TRANSLATE_STAGE : resolveEffectiveStage(configured, tenant.legacyOrigin !== undefined, runtime.stageOverrides, tenant.name, route.label, head.now)
  let answerHeaders = legacyAnswerHeaders(head, tenant, policy, successorBeforeSession(route.action))
  // Who calls, whatever the answer (SPEC 12: the registry records refused calls under their client
  // too); a credential that cannot be read is refused below, in SPEC 6's order.
  const { credential, unreadable, clientId } = identifyClient(runtime, head, facts, tenant, target, clientIdGiven)
  try {
    // The rewritten path, for the successor links; its blocked-prefix check belongs to the
    // translation, once the stage's side and the brownout decision are made (SPEC 14's order).
    const proxyPath = route.action !== 'proxy' ? undefined : buildRewrittenPath(route, match.params, match.undecodable)
    if (policy !== null && proxyPath !== undefined) answerHeaders = { ...answerHeaders, ...deprecationHeadersFor(policy, proxyPath) }
    const credentials = runtime.config.credentials
    const successorPath = proxyPath ?? (successorBeforeSession(route.action) as string)
    // SPEC 14 after the client id: the stage's side (an exemption lets a client through native-only).
    const exemptUntilMs = policy?.exemptUntilMs.get(clientId)
    facts.clientExempt = exemptUntilMs !== undefined && exemptUntilMs > head.now
    const migration = decideMigration(effective, configured, tenant.name, clientId, exemptUntilMs, head.now)
    facts.migration = migration
    if (migration.side === 'none') {
      if (policy !== null) facts.deprecation = { clientId, action: 'gone' }
      return refuse(facts, answerHeaders, nativeOnlyRefusal(policy, successorPath))
    }
    if (policy !== null) {
      // SPEC 12-13's order: the brownout and gone decision comes before any credential or body check, on either side.
      const decision = decideDeprecation(policy, tenant.name, route.label, clientId, head.now, successorPath, runtime.brownoutPauses)
      // SPEC 13's `exempt`: a client its exemption spared a refusal, native-only's 410 as much as a brownout's.
      if (migration.exemptUntil !== undefined && decision.facts.action === 'header') {
        decision.facts.action = 'exempt'
        decision.facts.exemptUntil = migration.exemptUntil
      }
      facts.deprecation = decision.facts
      if (decision.refusal !== undefined) return refuse(facts, answerHeaders, decision.refusal)
    }
    if (migration.side === 'legacy') {
      // SPEC 14: streamed to upstream.legacy as native traffic is (SPEC 7), the client's path, query,
      // body and credentials as sent; no credential, media-type, body or size check of the translation.
      facts.v4Path = undefined
      const legacyPlan: StreamPlan = {
        kind: 'stream',
        facts,
        answerHeaders: { ...answerHeaders, 'x-v4gw-served-by': 'legacy' },
        call: { origin: tenant.legacyOrigin as string, method: head.method, target: head.url, headers: streamHeaders(runtime, head), timeoutMs: runtime.config.limits.upstreamTimeoutMs, upstream: 'legacy' }
      }
      return migration.shadow === true ? { ...legacyPlan, shadow: true } : legacyPlan
    }
    if (tenant.usesStages) answerHeaders['x-v4gw-served-by'] = 'v4'
    // Checked before the credential is judged or the body read (docs/decisions.md, order of
    // checks); the legacy side refuses nothing and gets the client's path, not the rewritten one.
    if (proxyPath !== undefined) assertNotBlocked(runtime, parseRequestTarget(proxyPath), facts)
    if (unreadable !== undefined) throw unreadable
    if (proxyPath !== undefined) {
      // A rewrite that lands on a V4 runtime endpoint (a parameter in the path can make it) takes
      // what a runtime route takes: a session token, never a `key_*` (SPEC 5; V4 contract 5).
      // Nothing presented still goes on as nothing, as on every proxy route (SPEC 5).
      if (credential !== null && isRuntimeEndpoint(head.method, proxyPath)) resolveRuntimeAuthorization(credential)
      assertDecodableParams(match)
      facts.v4Path = proxyPath
      const query = removeQueryCredential(target.rawQuery, credentials.queryParam)
      const headers = streamHeaders(runtime, head)
      // SPEC 17: a V4 call made for a legacy request carries the client's baggage only with forwardBaggage.
      if (!runtime.config.tracing.forwardBaggage) headers.baggage = undefined
      return stream(facts, answerHeaders, {
        origin: tenant.upstreamOrigin,
        method: head.method,
        target: query === '' ? proxyPath : `${proxyPath}?${query}`,
        headers: rewriteProxyCredentialHeaders(headers, credential),
        timeoutMs: runtime.config.limits.upstreamTimeoutMs
      })
    }
    const ownHeaders = answerHeaders
    const sessionLink = policy === null || route.action !== 'session-execute' ? undefined : (sessionId: string) => deprecationHeadersFor(policy, sessionExecutePath(sessionId)).link
    const authorization = authorizeRuntimeCall(credential, head.headers['content-type'], head.headers['content-encoding'])
    assertDecodableParams(match)
    // SPEC 16, after the gateway's own refusals above: a malformed key is a 400 before the body is read.
    const keyed = readIdempotencyKey(tenant.idempotency.get(route.label), head)
    // SPEC 16's fingerprint reads every parameter as text: a raw one could meet a decoded one
    // (`%FF` as sent, `%25FF` decoded) and replay another request's answer.
    if (keyed !== undefined) assertDecodableParams(match, true)
    const limitBytes = runtime.config.limits.bodyBytes
    return {
      kind: 'read-body',
      facts,
      answerHeaders: ownHeaders,
      limitBytes,
      withBody(bytes) {
        try {
          // The listener reads at most this much; `explain` is handed the bytes whole.
          if (bytes.length > limitBytes) throw new GatewayError('PAYLOAD_TOO_LARGE', `request body is larger than ${limitBytes} bytes`)
          const { body, call, asSent } = parseRuntimeBody(bytes, tenant, route)
          const headers = runtimeCallHeaders(head.headers, head.clientAddress, head.protocol, head.requestId, authorization, runtime.config.tracing.forwardBaggage)
          headers.via = withVia(head.headers.via, runtime.via)
          // SPEC 16 `forwardHeader`: the key goes on to V4's executions too, for a backend that deduplicates itself.
          const forwardHeader = keyed?.settings.forwardHeader
          const calls = buildLegacyCalls({
            tenant: tenant.name,
            upstreamOrigin: candidateOrigin ?? tenant.upstreamOrigin,
            route,
            params: match.params,
            call,
            body,
            asSent,
            requestHeaders: head.headers,
            headers,
            executionHeader: forwardHeader == null ? undefined : { name: forwardHeader, value: (keyed as { key: string }).key },
            // authorizeRuntimeCall succeeded, so a credential was presented.
            tokenFingerprint: facts.clientFingerprint as string,
            sessions: runtime.config.sessions,
            sessionKeyMemo: head.memo?.sessionKey
          })
          const callsPlan: CallsPlan = { kind: 'calls', facts, answerHeaders: ownHeaders, origin: candidateOrigin ?? tenant.upstreamOrigin, timeoutMs: runtime.config.limits.upstreamTimeoutMs, calls, responseFields: tenant.responseFields, sessionLink }
          if (keyed === undefined) return callsPlan
          const idempotency = buildIdempotencyRequest(
            keyed,
            {
              tenant: tenant.name,
              credentialHash: facts.clientFingerprint as string,
              route: route.label,
              method: head.method,
              params: match.params,
              query: removeQueryCredential(target.rawQuery, credentials.queryParam),
              stateKey: calls.action === 'session-execute' ? calls.stateKey : '',
              body
            },
            // The lease covers a call as the pool makes it: its connect timeout is the start's (SPEC 8).
            { upstreamTimeoutMs: runtime.config.limits.upstreamTimeoutMs, connectTimeoutMs: runtime.connectTimeoutMs }
          )
          return { kind: 'idempotent', facts, answerHeaders: ownHeaders, calls: callsPlan, idempotency }
        } catch (error) {
          return refuse(facts, ownHeaders, error)
        }
      }
    }
  } catch (error) {
    return refuse(facts, answerHeaders, error)
  }
}

/**
 * SPEC 13's successor-version before any session is known: `/v4/execute`, or `/v4/sessions.start`
 * for a request that has not used a session; a proxy route's is its rewritten path.
 */
function successorBeforeSession(action: LegacyAction): string | undefined {
  return action === 'execute' ? V4_EXECUTE_PATH : action === 'session-execute' ? V4_SESSIONS_START_PATH : undefined
}

/**
 * SPEC 5 and 12, once per request: the legacy credential presented (or why it cannot be read) and
 * the client id. The credential's SHA-256 is the one the session key uses; only a credential that
 * could not be read (a conflict does not prevent an id) is hashed for the id alone.
 */
function identifyClient(runtime: GatewayRuntime, head: RequestHead, facts: PlanFacts, tenant: TenantRuntime, target: RequestTarget, clientIdGiven: string | undefined): { credential: PresentedCredential | null; unreadable: unknown; clientId: string } {
  const credentials = runtime.config.credentials
  const presented = credentialHeaders(head.rawHeaders, credentials.sources)
  let credential: PresentedCredential | null = null
  let unreadable: unknown
  try {
    credential = readLegacyCredential(presented, target.rawQuery, credentials)
    noteCredential(facts, credential, head)
  } catch (error) {
    unreadable = error
  }
  const clientId = clientIdGiven ?? resolveClientId(tenant.clientKey, (name) => headerValue(head, name), () => (unreadable === undefined ? facts.clientFingerprint : unreadableFingerprint(presented, target.rawQuery, credentials)))
  facts.clientId = clientId
  return { credential, unreadable, clientId }
}

/** A header as Node joins its copies (`, `), by lower-case name. */
function headerValue(head: RequestHead, name: string): string | undefined {
  const value = head.headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}

/** SPEC 12: the SHA-256 of the first credential presented, for a request whose credential is refused (two of them, or malformed). */
function unreadableFingerprint(presented: Record<string, string[] | undefined>, rawQuery: string, credentials: GatewayRuntime['config']['credentials']): string | undefined {
  const query = credentials.queryParam !== null && rawQuery !== '' ? new URLSearchParams(rawQuery) : null
  const token = firstPresentedToken(presented, query, credentials)
  return token === undefined ? undefined : fingerprintToken(token.value, token.origin === 'query' ? 'text' : 'header')
}

function noteCredential(facts: PlanFacts, credential: PresentedCredential | null, head: RequestHead): void {
  facts.credential = credential === null ? 'none' : credential.kind
  facts.clientFingerprint = credential === null ? undefined : fingerprintToken(credential.value, credential.origins[0] === 'query' ? 'text' : 'header', head.memo?.credentialFingerprint)
}

function stream(facts: PlanFacts, answerHeaders: Readonly<Record<string, string>>, call: StreamCall): StreamPlan {
  return { kind: 'stream', facts, answerHeaders, call }
}

/** Only the gateway's own coded errors become a refusal; anything else is a bug, and goes up as one. */
function refuse(facts: PlanFacts, answerHeaders: Readonly<Record<string, string>>, error: unknown): RefusePlan {
  if (!isGatewayError(error)) throw error
  // SPEC 14: a refusal is the gateway's own answer, whichever side had been chosen.
  const headers = answerHeaders['x-v4gw-served-by'] === undefined || answerHeaders['x-v4gw-served-by'] === 'gateway' ? answerHeaders : { ...answerHeaders, 'x-v4gw-served-by': 'gateway' }
  return { kind: 'refuse', facts, answerHeaders: headers, error }
}

/**
 * Whether a request is a call of one of V4's runtime endpoints (V4 contract 4-5: `POST
 * /v4/execute`, `/v4/sessions.start`, `/v4/sessions/{id}/executions.execute`), its path split
 * on `/` as a router splits it (an encoded `%2F` stays inside its segment) and each segment
 * decoded; the fixed segments compared without regard to case, to refuse a key on the side of
 * caution.
 */
function isRuntimeEndpoint(method: string, encodedPath: string): boolean {
  if (method !== 'POST') return false
  const segments = encodedPath.split('/').map(decodedSegment)
  if (segments.length === 3) {
    const path = segments.join('/')
    return path === V4_EXECUTE_PATH || path === V4_SESSIONS_START_PATH
  }
  // `/v4/sessions/{id}/executions.execute`, the id any segment but an empty one.
  return segments.length === 5 && segments.slice(0, 3).join('/') === '/v4/sessions' && segments[3] !== '' && segments[4] === 'executions.execute'
}

/** A path segment decoded and lower-cased; one that does not decode (a lone `%`) matches nothing. */
function decodedSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment).toLowerCase()
  } catch {
    return undefined
  }
}
