import type { ErrorCode } from '../errors/registry.js'
import type { SessionOutcome } from './session-events.js'

/** Why a request was shed before any work (SPEC 10); the `reason` of v4gw_load_shed_total. */
export type LoadShedReason = 'in_flight' | 'event_loop'

/** Whose `sessions.start` a request failed on: its own, or one another request sent (SPEC 4 step 3). */
export type FailedStart = 'sent' | 'shared'

/** Which upstream a call that failed went to, and why it failed: SPEC 17's labels of v4gw_upstream_failures_total. */
export interface UpstreamFailure {
  upstream: 'v4' | 'legacy' | 'shadow'
  cause: UpstreamFailureCause
}

export type UpstreamFailureCause = 'refused' | 'reset' | 'timeout' | 'bad_response' | 'dns'

/**
 * SPEC 13's closed set of `action` on v4gw_legacy_deprecation_total: served with the deprecation
 * headers, browned out, gone, or spared by an exemption (a pause's sparing is `header`).
 */
export type DeprecationAction = 'header' | 'brownout' | 'gone' | 'exempt'

/**
 * SPEC 16's closed set of `outcome` on v4gw_idempotency_total: the execution ran and its answer was
 * kept, a stored answer was replayed (at once, or after waiting for the first call), a retry met a
 * call still running, a key sent with another request, an answer too large to keep, an execution
 * whose answer was not kept (so a retry runs), or the shared store could not be asked.
 */
export type IdempotencyOutcome = 'executed' | 'replayed' | 'waited' | 'in_progress' | 'key_reused' | 'too_large' | 'not_kept' | 'store_unavailable'

/** SPEC 14's `x-v4gw-served-by`: the legacy upstream, the V4 translation, or the gateway's own answer. */
export type ServedBy = 'legacy' | 'v4' | 'gateway'

/** SPEC 2: every request on the traffic listener is exactly one of these. */
export type TrafficClass = 'legacy' | 'native' | 'blocked' | 'unknown'

/**
 * What a request's access line, metrics and migration report say of it (SPEC 9), filled from
 * what its steps return: the plan's facts, then the outcome of its upstream calls. Each step is
 * handed only the slice it reports (`UpstreamOutcome`, `LegacyCallTrace`), never the request.
 */
export class AccessRecord {
  tenant: string | undefined = undefined
  /** The tenant a request asked for that is not configured (TENANT_UNKNOWN): the line says which. */
  requestedTenant: string | undefined = undefined
  trafficClass: TrafficClass | undefined = undefined
  legacyRoute: string | undefined = undefined
  v4Path: string | undefined = undefined
  /** SHA-256 of the presented credential (legacy routes), for the migration report; never the credential. */
  clientFingerprint: string | undefined = undefined
  /** SPEC 12's client id of a legacy request, for the access line (SPEC 17) and the registry. */
  clientId: string | undefined = undefined
  /** SPEC 12: whether that client had an exemption in force, as the config the request was planned with said. */
  clientExempt: boolean | undefined = undefined
  /** SPEC 13's action on a deprecated legacy route, for v4gw_legacy_deprecation_total. */
  deprecationAction: DeprecationAction | undefined = undefined
  /** SPEC 5's kind of the credential a legacy request presented (`none` when it had none), for its span (SPEC 17); never a value. */
  credentialType: 'session-token' | 'service-key' | 'service-account-id' | 'none' | undefined = undefined
  /** SPEC 14's effective stage of a legacy request. */
  stage: string | undefined = undefined
  /** SPEC 14's `x-v4gw-served-by` of a legacy answer, on tenants that use stages (SPEC 17's `servedBy`). */
  servedBy: ServedBy | undefined = undefined
  sessionOutcome: SessionOutcome | undefined = undefined
  /** SPEC 16's outcome of a request that carried an idempotency key. */
  idempotencyOutcome: IdempotencyOutcome | undefined = undefined
  upstreamMs: number | undefined = undefined
  /** Response body bytes written to the client, by whichever step wrote them (SPEC 17). */
  bytesOut = 0
  /** The gateway's own error code the request ended with (SPEC 6). */
  errorCode: ErrorCode | undefined = undefined
  /** Set when the request was shed (SPEC 10). */
  shedReason: LoadShedReason | undefined = undefined
  /** Set when an upstream call of the request failed (SPEC 17). */
  upstreamFailure: UpstreamFailure | undefined = undefined
  /** The request failed on a `sessions.start`: one it sent, or one another request sent that it shared (SPEC 17 counts it once). */
  failedStart: FailedStart | undefined = undefined
  /** The status of the upstream failure that cut a streamed answer midway (502, 504, 408). */
  brokenOffStatus: number | undefined = undefined
  /**
   * SPEC 17's `log.access` of the config the request started with: a request under way finishes
   * under it, so a reload turning the lines off or on applies to the requests that start after it.
   */
  accessLine: boolean | undefined = undefined
}

/** What a streamed upstream call reports: its time to the answer's headers, and a failure after them. */
export type UpstreamOutcome = Pick<AccessRecord, 'upstreamMs' | 'errorCode' | 'brokenOffStatus' | 'bytesOut' | 'upstreamFailure'>
