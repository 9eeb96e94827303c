import type { MigrationStage } from '../config/schema.js'
import { GatewayError } from '../errors/registry.js'
import type { DeprecationPolicy } from '../tenancy/deprecation-policy.js'
import type { EffectiveStage, RouteMigration } from '../tenancy/migration-policy.js'
import { clientBucket } from './client-bucket.js'

/** Who serves a legacy request (SPEC 14): the legacy upstream, the V4 translation, or nobody (`native-only`). */
export type MigrationSide = 'legacy' | 'v4' | 'none'

/** What SPEC 14 decided for one legacy request of a tenant: logs, metrics and `explain` show it. */
export interface MigrationFacts {
  stage: MigrationStage
  /** `config` or `override` (`/admin/migration`'s `stageSource`). */
  stageSource: 'config' | 'override'
  /** Which config key set the stage: the route's entry, the tenant's, or none (the default `translate`). */
  stageFrom: 'route' | 'tenant' | 'default' | 'override'
  side: MigrationSide
  /** Why that side, in words: the stage itself, the canary's lists or bucket, an exemption. */
  why: string
  /** Stage `canary`: the percentage and what put the client on its side. */
  canary?: { percent: number; bucket?: number; listed?: 'allow' | 'deny' }
  /** Stage `native-only`: the exemption that lets the client through, until then. */
  exemptUntil?: string
  /** Stage `shadow`: the V4 translation is to be compared with the legacy answer (SPEC 15). */
  shadow?: boolean
}

/**
 * SPEC 14, after the client id and before the deprecation step: the side of the effective stage.
 * In `canary`, a client in `allow` is in; else one in `deny` is out; else its bucket (SPEC 13's
 * formula with "canary") below `percent × 100` is in, `anonymous` only at 100. Neither the route
 * nor the replica is in the bucket, so the side of a client holds on every route of the tenant
 * and every replica, and raising the percentage only moves clients to V4.
 */
export function decideMigration(effective: EffectiveStage, configured: RouteMigration, tenant: string, clientId: string, exemptUntilMs: number | undefined, nowMs: number): MigrationFacts {
  // The common case, stage translate from the config: one shared, frozen answer, nothing made per request.
  if (effective.stage === 'translate' && effective.source === 'config') return TRANSLATE_FACTS[configured.stageFrom]
  const facts: MigrationFacts = {
    stage: effective.stage,
    stageSource: effective.source,
    stageFrom: effective.source === 'override' ? 'override' : configured.stageFrom,
    side: 'v4',
    why: ''
  }
  switch (effective.stage) {
    case 'translate':
      facts.why = TRANSLATE_WHY
      return facts
    case 'legacy':
      facts.side = 'legacy'
      facts.why = 'stage legacy: upstream.legacy serves every client'
      return facts
    case 'shadow':
      facts.side = 'legacy'
      facts.shadow = true
      facts.why = 'stage shadow: upstream.legacy serves every client; the V4 translation is compared beside it'
      return facts
    case 'native-only':
      if (exemptUntilMs !== undefined && exemptUntilMs > nowMs) {
        facts.exemptUntil = new Date(exemptUntilMs).toISOString()
        facts.why = `stage native-only: the client is exempt until ${facts.exemptUntil}, so the V4 translation serves it`
      } else {
        facts.side = 'none'
        facts.why = 'stage native-only: the route is retired (410 LEGACY_GONE) for every client that is not exempt'
      }
      return facts
    case 'canary': {
      const canary = configured.canary
      const decision: NonNullable<MigrationFacts['canary']> = { percent: canary.percent }
      facts.canary = decision
      if (canary.allow.has(clientId)) {
        decision.listed = 'allow'
        facts.why = 'stage canary: the client is in allow, so the V4 translation serves it'
        return facts
      }
      if (canary.deny.has(clientId)) {
        decision.listed = 'deny'
        facts.side = 'legacy'
        facts.why = 'stage canary: the client is in deny, so upstream.legacy serves it'
        return facts
      }
      if (clientId === 'anonymous') {
        // `anonymous` is everybody without an id: in only when every client is.
        const inCanary = canary.bucketBound >= 10_000
        facts.side = inCanary ? 'v4' : 'legacy'
        facts.why = `stage canary: anonymous is in the canary only at 100 %, and it is at ${canary.percent} %`
        return facts
      }
      const bucket = clientBucket('canary', tenant, clientId)
      decision.bucket = bucket
      const inCanary = bucket < canary.bucketBound
      facts.side = inCanary ? 'v4' : 'legacy'
      facts.why = `stage canary: the client's bucket ${bucket} is ${inCanary ? 'below' : 'not below'} ${canary.bucketBound} (${canary.percent} %), so ${inCanary ? 'the V4 translation' : 'upstream.legacy'} serves it`
      return facts
    }
  }
}

const TRANSLATE_WHY = 'stage translate: the V4 translation serves every client'
const TRANSLATE_FACTS: Readonly<Record<RouteMigration['stageFrom'], MigrationFacts>> = Object.freeze({
  route: Object.freeze<MigrationFacts>({ stage: 'translate', stageSource: 'config', stageFrom: 'route', side: 'v4', why: TRANSLATE_WHY }),
  tenant: Object.freeze<MigrationFacts>({ stage: 'translate', stageSource: 'config', stageFrom: 'tenant', side: 'v4', why: TRANSLATE_WHY }),
  default: Object.freeze<MigrationFacts>({ stage: 'translate', stageSource: 'config', stageFrom: 'default', side: 'v4', why: TRANSLATE_WHY })
})

/**
 * SPEC 14's answer of stage `native-only` to a client that is not exempt: 410 LEGACY_GONE with
 * SPEC 13's `error.migration` (no `windowEnd`), nothing forwarded.
 */
export function nativeOnlyRefusal(policy: DeprecationPolicy | null, successorPath: string): GatewayError {
  const migration: Record<string, string> = {}
  if (policy?.sunset !== undefined) migration.sunset = policy.sunset
  migration.successor = successorPath
  if (policy?.link !== undefined) migration.link = policy.link
  return new GatewayError('LEGACY_GONE', `this legacy route is retired (stage native-only); call ${successorPath} instead`, { migration })
}

/**
 * RFC 9110 7.6.3: `Via` is a list of `protocol received-by [comment]` members; a request whose
 * list names this fleet's `received-by` has been here before (SPEC 14).
 */
export function cameThroughFleet(via: string | string[] | undefined, receivedBy: string): boolean {
  if (via === undefined) return false
  const value = Array.isArray(via) ? via.join(',') : via
  if (!value.includes(receivedBy)) return false
  for (const member of value.split(',')) {
    const parts = member.trim().split(/[ \t]+/)
    if (parts[1] === receivedBy) return true
  }
  return false
}

/** A request's `Via` with this gateway's member appended (RFC 9110 7.6.3: each intermediary adds its own). */
export function withVia(incoming: string | string[] | undefined, member: string): string {
  if (incoming === undefined) return member
  const value = Array.isArray(incoming) ? incoming.join(', ') : incoming
  return value.trim() === '' ? member : `${value}, ${member}`
}

export const LOOP_DETECTED_MESSAGE = 'this request already passed through this gateway fleet (Via): it is not forwarded again'
