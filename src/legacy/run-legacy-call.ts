import type { SessionsConfig } from '../config/schema.js'
import { GatewayError } from '../errors/registry.js'
import type { ResolvedSession, SessionMap, SessionOutcome, StartResult } from '../sessions/session-map.js'
import { buildSessionKey } from '../sessions/session-key.js'
import type { TenantRuntime } from '../tenancy/tenant-runtime.js'
import type { CancelScope, UpstreamClient, UpstreamResponse, UpstreamTiming } from '../upstream/upstream-client.js'
import { getAtPointer } from '../util/json-pointer.js'
import type { LegacyCall } from './parse-legacy-body.js'
import type { CompiledRoute } from './route-table.js'
import { toJsonBody } from './to-json-body.js'
import { canonicalDefaults, translateExecute, translateSessionDefaults, translateSessionExecute } from './translate.js'

export const V4_EXECUTE_PATH = '/v4/execute'
export const V4_SESSIONS_START_PATH = '/v4/sessions.start'

export function sessionExecutePath(sessionId: string): string {
  return `/v4/sessions/${encodeURIComponent(sessionId)}/executions.execute`
}

export interface LegacyCallContext {
  tenant: TenantRuntime
  route: CompiledRoute
  params: Record<string, string>
  call: LegacyCall
  /** The parsed body, for a `body:` state key. */
  body: Record<string, unknown>
  requestHeaders: Record<string, string | string[] | undefined>
  /** Headers for every upstream call: `authorization`, `x-request-id`, `x-forwarded-*`, … */
  upstreamHeaders: Record<string, string>
  tokenFingerprint: string
  /** Cancels the execution calls when the client goes away. */
  cancelScope: CancelScope
  /** Filled in as the call goes, so that a call that fails midway is still logged with them (SPEC 9). */
  trace: LegacyCallTrace
}

/** What the request's log line says of its V4 calls: the last path called, the time, the session-map outcome. */
export interface LegacyCallTrace extends UpstreamTiming {
  v4Path: string | undefined
  sessionOutcome: SessionOutcome | undefined
}

export interface LegacyCallResult {
  response: UpstreamResponse
  /** The session the execution ran in (session-execute only). */
  sessionId?: string
}

export interface LegacyCallDeps {
  upstream: UpstreamClient
  sessions: SessionMap<UpstreamResponse>
  sessionsConfig: SessionsConfig
  upstreamTimeoutMs: number
}

/** Runs a legacy `execute` or `session-execute` call as V4 calls (SPEC 4). */
export function runLegacyCall(context: LegacyCallContext, deps: LegacyCallDeps): Promise<LegacyCallResult> {
  // Not async itself: an async function returning another's promise costs two more turns of the microtask queue.
  return context.route.action === 'execute' ? runExecute(context, deps) : runSessionExecute(context, deps)
}

async function runExecute(context: LegacyCallContext, deps: LegacyCallDeps): Promise<LegacyCallResult> {
  return { response: await post(deps, context, V4_EXECUTE_PATH, toJsonBody(translateExecute(context.call)), context.cancelScope) }
}

async function runSessionExecute(context: LegacyCallContext, deps: LegacyCallDeps): Promise<LegacyCallResult> {
  const trace = context.trace
  const defaults = translateSessionDefaults(context.call)
  const key = buildSessionKey(context.tenant.name, context.tenant.upstreamOrigin, context.tokenFingerprint, readStateKey(context), canonicalDefaults(defaults))
  // Serialised first: a body that cannot be must not cost a session.
  const body = toJsonBody(translateSessionExecute(context.call))
  // Called only by the request that starts the session: the others share its start.
  let startedHere = false
  const start = async (): Promise<StartResult<UpstreamResponse>> => {
    startedHere = true
    // Not cancellable: the start is shared by every waiter on the key, so one leaving must not cancel it.
    const response = await post(deps, context, V4_SESSIONS_START_PATH, JSON.stringify(defaults), undefined)
    if (response.statusCode < 200 || response.statusCode > 299) return { rejection: response }
    return { sessionId: readSessionId(response, deps.sessionsConfig.sessionIdPaths) }
  }

  // Until an execution goes out, what this request waits on is a sessions.start, its own or one
  // it shares (whose time is on the trace of the request that sent it).
  trace.v4Path = V4_SESSIONS_START_PATH
  let first: ResolvedSession<UpstreamResponse>
  try {
    first = await deps.sessions.resolve(key, context.tenant.name, start)
  } catch (error) {
    // A start that failed still had its outcome (SPEC 9): this request's own, or one it shared.
    trace.sessionOutcome = startedHere ? 'miss' : 'coalesced'
    throw error
  }
  trace.sessionOutcome = first.outcome
  if (first.result.rejection !== undefined) return { response: first.result.rejection }
  let sessionId = first.result.sessionId
  let response = await post(deps, context, sessionExecutePath(sessionId), body, context.cancelScope)

  // SPEC 4 step 5: a mapped session the backend no longer knows is replaced once.
  if (first.outcome !== 'miss' && deps.sessionsConfig.staleStatuses.includes(response.statusCode)) {
    await deps.sessions.evict(key, context.tenant.name, sessionId)
    trace.sessionOutcome = 'stale-retry'
    trace.v4Path = V4_SESSIONS_START_PATH
    const retry = await deps.sessions.resolve(key, context.tenant.name, start)
    if (retry.result.rejection !== undefined) return { response: retry.result.rejection }
    sessionId = retry.result.sessionId
    response = await post(deps, context, sessionExecutePath(sessionId), body, context.cancelScope)
  }
  // A 401 evicts the entry, the retried one included, and is returned as it came.
  if (response.statusCode === 401) await deps.sessions.evict(key, context.tenant.name, sessionId)
  return { response, sessionId }
}

/** `cancelScope` is explicit: a default would also fill in an `undefined` passed on purpose. */
function post(deps: LegacyCallDeps, context: LegacyCallContext, path: string, body: string, cancelScope: CancelScope | undefined): Promise<UpstreamResponse> {
  context.trace.v4Path = path
  return deps.upstream.request({
    origin: context.tenant.upstreamOrigin,
    method: 'POST',
    path,
    headers: context.upstreamHeaders,
    body,
    cancelScope,
    timing: context.trace,
    timeoutMs: deps.upstreamTimeoutMs
  })
}

/** The route's `stateKey` source (SPEC 4): a path parameter, a header or a body pointer; "" when absent. */
export function readStateKey(context: Pick<LegacyCallContext, 'route' | 'params' | 'requestHeaders' | 'call' | 'body'>): string {
  const source = context.route.stateKey
  if (source === undefined) return ''
  if (source.startsWith('param:')) return context.params[source.slice('param:'.length)] ?? ''
  if (source.startsWith('header:')) {
    const value = context.requestHeaders[source.slice('header:'.length).toLowerCase()]
    return Array.isArray(value) ? value.join(',') : (value ?? '')
  }
  const pointer = source.slice('body:'.length)
  // The default `stateId` field may be remapped by `legacy.fields`; read it where the call did.
  const value = pointer === '/stateId' ? context.call.stateId : getAtPointer(context.body, pointer)
  if (value === undefined || value === null) return ''
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return String(value)
  throw new GatewayError('INVALID_REQUEST', `the state key at ${pointer} must be a string`, { details: [{ pointer, message: 'expected a string' }] })
}

/** The first string at `sessions.sessionIdPaths` (SPEC 4 step 2); none is a bad upstream answer. */
function readSessionId(response: UpstreamResponse, paths: readonly string[]): string {
  let document: unknown
  try {
    document = JSON.parse(response.body.toString('utf8'))
  } catch {
    // No cause: V8's message quotes the body, and an upstream may echo the token into it (SPEC 9).
    throw new GatewayError('UPSTREAM_BAD_RESPONSE', 'sessions.start answered with a body that is not JSON')
  }
  for (const path of paths) {
    const value = getAtPointer(document, path)
    if (typeof value !== 'string' || value === '') continue
    // It goes back in x-v4-session-id (SPEC 4 step 6): one that cannot would fail only after the
    // execution ran, and on every later call of the state key it stayed mapped to.
    if (!HEADER_VALUE.test(value)) throw new GatewayError('UPSTREAM_BAD_RESPONSE', 'sessions.start answered with a session id that cannot be sent in a header')
    // encodeURIComponent leaves dots alone: "/v4/sessions/../executions.execute" is another path.
    if (value === '.' || value === '..') throw new GatewayError('UPSTREAM_BAD_RESPONSE', 'sessions.start answered with a session id that cannot be a path segment')
    return value
  }
  throw new GatewayError('UPSTREAM_BAD_RESPONSE', 'sessions.start answered without a session id')
}

// What Node's writeHead accepts in a header value (RFC 9110 5.5 field-content, obs-text included), without surrounding whitespace.
const HEADER_VALUE = /^[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?$/
