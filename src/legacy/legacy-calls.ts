import type { SessionsConfig } from '../config/schema.js'
import { GatewayError } from '../errors/registry.js'
import { buildSessionKey, type SessionKeyMemo } from '../sessions/session-key.js'
import { getAtPointer } from '../util/json-pointer.js'
import type { LegacyCall } from './parse-legacy-body.js'
import type { CompiledRoute } from './route-table.js'
import { toJsonBody } from './to-json-body.js'
import { translateExecute, translateSessionDefaults, translateSessionExecute } from './translate.js'

export const V4_EXECUTE_PATH = '/v4/execute'
export const V4_SESSIONS_START_PATH = '/v4/sessions.start'

export function sessionExecutePath(sessionId: string): string {
  return `/v4/sessions/${encodeURIComponent(sessionId)}/executions.execute`
}

/** A V4 call made for a legacy request, whose answer the gateway reads (SPEC 4). */
export interface V4Call {
  method: 'POST'
  path: string
  headers: Record<string, string>
  /** JSON text. */
  body: string
}

/** SPEC 4 `execute`: one call. */
export interface ExecuteCalls {
  action: 'execute'
  execution: V4Call
}

/** SPEC 4 `session-execute`: a `sessions.start` only on a session-map miss, then the execution in the session. */
export interface SessionExecuteCalls {
  action: 'session-execute'
  tenant: string
  /** The session-map key: tenant, upstream, token fingerprint, state key, canonical defaults (SPEC 4 step 1). */
  sessionKey: string
  stateKey: string
  /** Made only on a session-map miss: most requests of a state key find their session mapped. */
  start: () => V4Call
  execution: (sessionId: string) => V4Call
  staleStatuses: readonly number[]
  sessionIdPaths: readonly string[]
}

export type LegacyCalls = ExecuteCalls | SessionExecuteCalls

export interface LegacyCallInput {
  tenant: string
  upstreamOrigin: string
  route: CompiledRoute
  params: Readonly<Record<string, string>>
  call: LegacyCall
  /** The parsed body, for a `body:` state key. */
  body: Record<string, unknown>
  /** The body's text when it is the V4 execution body as it stands (prepare-legacy-call.ts `asV4ExecuteBody`). */
  asSent?: string | undefined
  requestHeaders: Record<string, string | string[] | undefined>
  /** Headers of every V4 call: `authorization`, `x-request-id`, `x-forwarded-*`, … (runtime-call-headers.ts). */
  headers: Record<string, string>
  /**
   * A header of the execution calls only: SPEC 16's `forwardHeader` with the request's key. Not on
   * a `sessions.start`, which is another operation, and one that requests with other keys share.
   */
  executionHeader?: { readonly name: string; readonly value: string } | undefined
  tokenFingerprint: string
  sessions: Pick<SessionsConfig, 'staleStatuses' | 'sessionIdPaths'>
  /** The connection's memo of its last session key (kernel/connection-memo.ts); none in `explain`. */
  sessionKeyMemo?: SessionKeyMemo | undefined
}

/**
 * The V4 calls a parsed legacy runtime call becomes (SPEC 4), every body serialised now: a body
 * that cannot be is the client's 400 before any call, and never costs a session.
 */
export function buildLegacyCalls(input: LegacyCallInput): LegacyCalls {
  const headers = input.headers
  const extra = input.executionHeader
  const executionHeaders = extra === undefined ? headers : { ...headers, [extra.name]: extra.value }
  if (input.route.action === 'execute') {
    const body = input.asSent ?? toJsonBody(translateExecute(input.call))
    return { action: 'execute', execution: { method: 'POST', path: V4_EXECUTE_PATH, headers: executionHeaders, body } }
  }
  const defaults = translateSessionDefaults(input.call)
  const stateKey = readStateKey(input)
  const executionBody = toJsonBody(translateSessionExecute(input.call))
  return {
    action: 'session-execute',
    tenant: input.tenant,
    sessionKey: buildSessionKey(input.tenant, input.upstreamOrigin, input.tokenFingerprint, stateKey, defaults, input.sessionKeyMemo),
    stateKey,
    start: () => ({ method: 'POST', path: V4_SESSIONS_START_PATH, headers, body: JSON.stringify(defaults) }),
    execution: (sessionId) => ({ method: 'POST', path: sessionExecutePath(sessionId), headers: executionHeaders, body: executionBody }),
    staleStatuses: input.sessions.staleStatuses,
    sessionIdPaths: input.sessions.sessionIdPaths
  }
}

/** The route's `stateKey` source (SPEC 4): a path parameter, a header or a body pointer; "" when absent. */
export function readStateKey(input: Pick<LegacyCallInput, 'route' | 'params' | 'requestHeaders' | 'body'> & { call: Pick<LegacyCall, 'stateId'> }): string {
  const source = input.route.stateKey
  if (source === undefined) return ''
  if (source.startsWith('param:')) return input.params[source.slice('param:'.length)] ?? ''
  if (source.startsWith('header:')) {
    const value = input.requestHeaders[source.slice('header:'.length).toLowerCase()]
    return Array.isArray(value) ? value.join(',') : (value ?? '')
  }
  const pointer = source.slice('body:'.length)
  // The default `stateId` field may be remapped by `legacy.fields`; read it where the call did.
  const value = pointer === '/stateId' ? input.call.stateId : getAtPointer(input.body, pointer)
  if (value === undefined || value === null) return ''
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return String(value)
  throw new GatewayError('INVALID_REQUEST', `the state key at ${pointer} must be a string`, { details: [{ pointer, message: 'expected a string' }] })
}
