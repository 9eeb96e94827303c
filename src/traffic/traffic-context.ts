import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { resolveRequestId } from '../observability/request-id.js'
import type { SessionOutcome } from '../sessions/session-map.js'
import type { CancelScope } from '../upstream/upstream-client.js'

export type TrafficClass = 'legacy' | 'native' | 'blocked' | 'unknown'

/**
 * One request on the traffic listener, from its first byte to its 'close': the Node request and
 * response, the resolved request id, the headers the gateway puts on whatever answer leaves
 * (its own error or the upstream's), and what the access log line says (SPEC 9), filled as the
 * request goes. It is also the request's cancel scope, so that a client going away cancels its
 * upstream call. A class, so that every request has the same shape.
 */
export class TrafficContext implements CancelScope {
  readonly startedAt = performance.now()
  /** SPEC 6: the client's `x-request-id` when valid, else a new one. */
  readonly id: string
  /** Headers on every answer to this request, set before its answer is known. */
  readonly ownHeaders: OutgoingHttpHeaders = {}
  cancelled = false
  cancel: (() => void) | undefined = undefined
  tenant: string | undefined = undefined
  trafficClass: TrafficClass | undefined = undefined
  legacyRoute: string | undefined = undefined
  v4Path: string | undefined = undefined
  sessionOutcome: SessionOutcome | undefined = undefined
  upstreamMs: number | undefined = undefined
  errorCode: string | undefined = undefined
  /** SHA-256 of the presented credential (legacy routes), for the migration report. */
  clientFingerprint: string | undefined = undefined
  /** The connection's bytes read when the body last made progress, and when (body-stall.ts). */
  bodyBytesSeen = 0
  bodyProgressAt = 0
  /** The status of the upstream failure that cut a streamed answer midway (502, 504), for the log. */
  brokenOffStatus: number | undefined = undefined
  /** Answered 408 because its body stopped arriving: what fails after that is not answered again. */
  bodyStalled = false

  constructor(
    readonly request: IncomingMessage,
    readonly response: ServerResponse
  ) {
    this.id = resolveRequestId(request.headers['x-request-id'])
  }

  /** Whether the client broke off or went away: then no failure is the gateway's. */
  get clientGone(): boolean {
    return this.cancelled || clientWentAway(this.request)
  }
}

/**
 * Whether the client broke off its request or closed its connection. Not `request.destroyed`
 * alone: Node destroys a request once its body has been read to the end, which every legacy
 * call's has by the time its upstream can fail.
 */
export function clientWentAway(request: IncomingMessage): boolean {
  return (request.destroyed && !request.complete) || request.socket?.destroyed === true
}
