import { GatewayError } from '../errors/registry.js'
import type { DeprecationAction } from '../observability/access-record.js'
import type { BrownoutPauses } from '../tenancy/brownout-pauses.js'
import type { DeprecationPolicy } from '../tenancy/deprecation-policy.js'
import { clientBucket } from './client-bucket.js'

/** What SPEC 13 decided for one request of a deprecated route: logs and `explain` show it. */
export interface DeprecationFacts {
  /** SPEC 12's client id the selection used. */
  clientId: string
  /** SPEC 13's metric actions: `header` (served, with the headers), `brownout`, `gone`, `exempt`. */
  action: DeprecationAction
  /** The client's brownout bucket (0-9999), computed while a window is open. */
  bucket?: number
  /** The end of the brownout window open now. */
  windowEnd?: string
  /** Set when an exemption spared the client a brownout or gone answer. */
  exemptUntil?: string
  /** Set when a pause spared the client a brownout or gone answer. */
  pausedUntil?: string
}

export interface DeprecationDecision {
  facts: DeprecationFacts
  /** LEGACY_BROWNOUT or LEGACY_GONE, when the request is answered so. */
  refusal: GatewayError | undefined
}

/**
 * SPEC 13: `(first 8 bytes of SHA-256("brownout\0" + tenant + "\0" + client id), unsigned
 * big-endian) mod 10000`. No route in it: a client selected on one route is selected on all.
 */
export function brownoutBucket(tenant: string, clientId: string): number {
  return clientBucket('brownout', tenant, clientId)
}

/**
 * SPEC 13 for one request, at `nowMs` (the head's arrival time): past an enforced sunset, gone;
 * in a window that selects the client, a brownout; an exemption or a pause spares the client
 * either. Pure but for reading the pauses.
 */
export function decideDeprecation(
  policy: DeprecationPolicy,
  tenant: string,
  route: string,
  clientId: string,
  nowMs: number,
  successorPath: string,
  pauses: BrownoutPauses
): DeprecationDecision {
  const facts: DeprecationFacts = { clientId, action: 'header' }
  const gone = policy.goneAfterSunset && nowMs >= (policy.sunsetMs as number)
  let windowEndMs: number | undefined
  if (!gone) {
    for (const window of policy.windows) {
      if (window.startMs > nowMs) break
      if (nowMs < window.endMs) {
        windowEndMs = window.endMs
        break
      }
    }
    if (windowEndMs === undefined) return { facts, refusal: undefined }
    facts.windowEnd = new Date(windowEndMs).toISOString()
    // `anonymous` is everybody who sent no credential: selected only when every client is.
    const selected = clientId === 'anonymous' ? policy.bucketBound >= 10_000 : (facts.bucket = brownoutBucket(tenant, clientId)) < policy.bucketBound
    if (!selected) return { facts, refusal: undefined }
  }
  const exemptUntilMs = policy.exemptUntilMs.get(clientId)
  if (exemptUntilMs !== undefined && exemptUntilMs > nowMs) {
    facts.action = 'exempt'
    facts.exemptUntil = new Date(exemptUntilMs).toISOString()
    return { facts, refusal: undefined }
  }
  const pause = pauses.activeFor(tenant, route, nowMs)
  if (pause !== undefined) {
    facts.pausedUntil = pause.until
    return { facts, refusal: undefined }
  }
  const migration: Record<string, string> = {}
  if (!gone) migration.windowEnd = facts.windowEnd as string
  if (policy.sunset !== undefined) migration.sunset = policy.sunset
  migration.successor = successorPath
  if (policy.link !== undefined) migration.link = policy.link
  if (gone) {
    facts.action = 'gone'
    return { facts, refusal: new GatewayError('LEGACY_GONE', `this legacy route was retired at its sunset, ${policy.sunset as string}; call ${successorPath} instead`, { migration }) }
  }
  facts.action = 'brownout'
  return {
    facts,
    refusal: new GatewayError('LEGACY_BROWNOUT', `this legacy route is in a scheduled brownout until ${facts.windowEnd as string}; call ${successorPath} instead`, { migration })
  }
}
