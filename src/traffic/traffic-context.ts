import type { SessionOutcome } from '../sessions/session-map.js'
import type { CancelScope } from '../upstream/upstream-client.js'

export type TrafficClass = 'legacy' | 'native' | 'blocked' | 'unknown'

/**
 * What the access log line says about a request (SPEC 9), filled as the request goes; also the
 * request's cancel scope, so that a client going away cancels its upstream call.
 */
export interface TrafficContext extends CancelScope {
  startedAt: number
  tenant?: string
  trafficClass?: TrafficClass
  legacyRoute?: string
  v4Path?: string
  sessionOutcome?: SessionOutcome
  upstreamMs?: number
  errorCode?: string
  /** SHA-256 of the presented credential (legacy routes), for the migration report. */
  clientFingerprint?: string
}

declare module 'fastify' {
  interface FastifyRequest {
    traffic: TrafficContext
  }
}
