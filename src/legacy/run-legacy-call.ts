import { GatewayError } from '../errors/registry.js'
import type { FailedStart } from '../observability/access-record.js'
import type { ResolvedSession, SessionMap, SessionOutcome, StartResult } from '../sessions/session-map.js'
import type { CallTracer, CancelScope, UpstreamClient, UpstreamResponse, UpstreamTiming } from '../upstream/upstream-client.js'
import { getAtPointer } from '../util/json-pointer.js'
import { V4_SESSIONS_START_PATH, type ExecuteCalls, type LegacyCalls, type SessionExecuteCalls, type V4Call } from './legacy-calls.js'

/** What the request's log line says of its V4 calls: the last path called, the time, the session-map outcome. */
export interface LegacyCallTrace extends UpstreamTiming {
  v4Path: string | undefined
  sessionOutcome: SessionOutcome | undefined
  /**
   * The request failed on a `sessions.start`, its own or one it shared. SPEC 17 counts each failed
   * call once: the client session map counts its starts' failures itself; a comparison counts its own.
   */
  failedStart?: FailedStart
  /**
   * True while the request waits on a `sessions.start` another request sent (known at once with a
   * store that answers synchronously, as a comparison's): a comparison let go at its timeout then
   * made no call of its own to count.
   */
  waitsOnSharedStart?: boolean
}

export interface LegacyCallResult {
  response: UpstreamResponse
  /** The session the execution ran in (session-execute only). */
  sessionId?: string
}

export interface LegacyCallDeps {
  upstream: UpstreamClient
  sessions: SessionMap<UpstreamResponse>
}

/** Where and how long: the tenant's upstream and the request's timeout. */
export interface LegacyCallTarget {
  origin: string
  timeoutMs: number
  /** Cancels the execution calls when the client goes away. */
  cancelScope: CancelScope
  /** Filled in as the calls go, so that a request that fails midway is still logged with them (SPEC 9). */
  trace: LegacyCallTrace
  /** SPEC 17: what traces the calls, while tracing is on. */
  tracer: CallTracer | undefined
  /**
   * Hears each execution call as it goes out, once its connection is made (SPEC 16: an answer
   * after one is kept, the call may have run; one that failed before it was sent is not).
   */
  onExecution?: () => void
  /**
   * Hears an execution answered that its session is unknown (SPEC 4 step 5's stale status), which
   * the gateway replaces by a new session and a second execution: that one did not run (SPEC 16).
   */
  onStaleExecution?: () => void
  /**
   * Hears the session an execution went out to (SPEC 4 step 6: the answer names it, the gateway's
   * own after it too), and `undefined` when a stale answer showed that session gone.
   */
  onSession?: (sessionId: string | undefined) => void
  /**
   * `cancelScope` cancels a `sessions.start` this request sent, too. Only where every request
   * that may share the start can lose it: SPEC 15's comparisons, which a shutdown abandons and
   * `timeoutMs` bounds, and whose shadow session map no client request uses.
   */
  cancelsStart?: boolean
  /** Each answer is read up to this many bytes (SPEC 15's `maxBodyBytes`); else the client's default. */
  maxAnswerBytes?: number
}

/** A session being started, by this request or another (then `waitsOnSharedStart` while it waits). */
function awaitedStart<T>(resolving: Promise<T>, trace: LegacyCallTrace, startedHere: boolean): Promise<T> {
  trace.waitsOnSharedStart = !startedHere
  return resolving.finally(() => {
    trace.waitsOnSharedStart = false
  })
}

/** Makes a legacy request's planned V4 calls (SPEC 4). */
export function runLegacyCalls(calls: LegacyCalls, target: LegacyCallTarget, deps: LegacyCallDeps): Promise<LegacyCallResult> {
  // Not async itself: an async function returning another's promise costs two more turns of the microtask queue.
  return calls.action === 'execute' ? runExecute(calls, target, deps) : runSessionExecute(calls, target, deps)
}

async function runExecute(calls: ExecuteCalls, target: LegacyCallTarget, deps: LegacyCallDeps): Promise<LegacyCallResult> {
  return { response: await send(deps, target, calls.execution, target.cancelScope, target.onExecution) }
}

async function runSessionExecute(calls: SessionExecuteCalls, target: LegacyCallTarget, deps: LegacyCallDeps): Promise<LegacyCallResult> {
  const trace = target.trace
  // Called only by the request that starts the session: the others share its start.
  let startedHere = false
  const start = async (): Promise<StartResult<UpstreamResponse>> => {
    startedHere = true
    // Not cancellable by a client: the start is shared by every waiter on the key, so one leaving must not cancel it.
    const response = await send(deps, target, calls.start(), target.cancelsStart === true ? target.cancelScope : undefined)
    if (response.statusCode < 200 || response.statusCode > 299) return { rejection: response }
    return { sessionId: readSessionId(response, calls.sessionIdPaths) }
  }

  // Until an execution goes out, what this request waits on is a sessions.start, its own or one
  // it shares (whose time is on the trace of the request that sent it).
  trace.v4Path = V4_SESSIONS_START_PATH
  let first: ResolvedSession<UpstreamResponse>
  try {
    // A hit comes back as it is (session-map.ts): awaited only when it is a promise, since an
    // await of a plain value still costs a turn of the microtask queue.
    const resolving = deps.sessions.resolve(calls.sessionKey, calls.tenant, start)
    first = resolving instanceof Promise ? await awaitedStart(resolving, trace, startedHere) : resolving
  } catch (error) {
    // A start that failed still had its outcome (SPEC 9): this request's own, or one it shared.
    trace.sessionOutcome = startedHere ? 'miss' : 'coalesced'
    trace.failedStart = startedHere ? 'sent' : 'shared'
    throw error
  }
  trace.sessionOutcome = first.outcome
  if (first.result.rejection !== undefined) return { response: first.result.rejection }
  let sessionId = first.result.sessionId
  let response = await send(deps, target, calls.execution(sessionId), target.cancelScope, onExecutionIn(target, sessionId))

  // SPEC 4 step 5: a mapped session the backend no longer knows is replaced once.
  if (first.outcome !== 'miss' && calls.staleStatuses.includes(response.statusCode)) {
    target.onStaleExecution?.()
    // That session is gone: an answer from here on names the new one, or none.
    target.onSession?.(undefined)
    await deps.sessions.evict(calls.sessionKey, calls.tenant, sessionId)
    trace.sessionOutcome = 'stale-retry'
    trace.v4Path = V4_SESSIONS_START_PATH
    let retry: ResolvedSession<UpstreamResponse>
    try {
      const resolving = deps.sessions.resolve(calls.sessionKey, calls.tenant, start)
      retry = resolving instanceof Promise ? await awaitedStart(resolving, trace, startedHere) : resolving
    } catch (error) {
      // The new start, this request's or one that requests meeting the same stale session share.
      trace.failedStart = startedHere ? 'sent' : 'shared'
      throw error
    }
    if (retry.result.rejection !== undefined) return { response: retry.result.rejection }
    sessionId = retry.result.sessionId
    response = await send(deps, target, calls.execution(sessionId), target.cancelScope, onExecutionIn(target, sessionId))
  }
  // A 401 evicts the entry, the retried one included, and is returned as it came, without waiting
  // on the shared store's delete (SPEC 12: only misses and claims talk to it on the request path):
  // this replica's copy goes at once, in the call.
  if (response.statusCode === 401) deps.sessions.evict(calls.sessionKey, calls.tenant, sessionId).catch(() => undefined)
  return { response, sessionId }
}

/** What hears an execution in `sessionId` go out (`onExecution`, `onSession`); no function when nothing listens. */
function onExecutionIn(target: LegacyCallTarget, sessionId: string): (() => void) | undefined {
  const { onExecution, onSession } = target
  if (onSession === undefined) return onExecution
  return () => {
    onSession(sessionId)
    onExecution?.()
  }
}

/** `cancelScope` is explicit: a default would also fill in an `undefined` passed on purpose. `onSent`: an execution's. */
function send(deps: LegacyCallDeps, target: LegacyCallTarget, call: V4Call, cancelScope: CancelScope | undefined, onSent?: () => void): Promise<UpstreamResponse> {
  target.trace.v4Path = call.path
  return deps.upstream.request({
    origin: target.origin,
    method: call.method,
    path: call.path,
    headers: call.headers,
    body: call.body,
    cancelScope,
    timing: target.trace,
    timeoutMs: target.timeoutMs,
    tracer: target.tracer,
    maxBodyBytes: target.maxAnswerBytes,
    onSent
  })
}

/**
 * A `sessions.start` answered whole, but without a session id the gateway can use (a body that is
 * not JSON, no id at the paths, an id that cannot be sent): V4 did answer over HTTP, so SPEC 15
 * compares translate's 502 with the legacy answer; no answer at all is a candidate_error.
 */
export class UnusableSessionIdError extends GatewayError {
  constructor(message: string) {
    super('UPSTREAM_BAD_RESPONSE', message)
  }
}

/** The first string at `sessions.sessionIdPaths` (SPEC 4 step 2); none is a bad upstream answer. */
function readSessionId(response: UpstreamResponse, paths: readonly string[]): string {
  let document: unknown
  try {
    document = JSON.parse(response.body.toString('utf8'))
  } catch {
    // No cause: V8's message quotes the body, and an upstream may echo the token into it (SPEC 9).
    throw new UnusableSessionIdError('sessions.start answered with a body that is not JSON')
  }
  for (const path of paths) {
    const value = getAtPointer(document, path)
    if (typeof value !== 'string' || value === '') continue
    // It goes back in x-v4-session-id (SPEC 4 step 6): one that cannot would fail only after the
    // execution ran, and on every later call of the state key it stayed mapped to.
    if (!HEADER_VALUE.test(value)) throw new UnusableSessionIdError('sessions.start answered with a session id that cannot be sent in a header')
    // encodeURIComponent leaves dots alone: "/v4/sessions/../executions.execute" is another path.
    if (value === '.' || value === '..') throw new UnusableSessionIdError('sessions.start answered with a session id that cannot be a path segment')
    return value
  }
  throw new UnusableSessionIdError('sessions.start answered without a session id')
}

// What Node's writeHead accepts in a header value (RFC 9110 5.5 field-content, obs-text included), without surrounding whitespace.
const HEADER_VALUE = /^[\x21-\x7e\x80-\xff](?:[\t\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?$/
