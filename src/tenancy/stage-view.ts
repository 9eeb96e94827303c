import { isAllowedOverride, resolveEffectiveStage } from './migration-policy.js'
import type { GatewayRuntime } from './gateway-runtime.js'
import { suspendedReason } from './set-stage-override.js'
import type { StageOverrideRecords, StoredStageOverride } from './stage-override-records.js'

/** A route's stage as SPEC 14 decides it now, as `/admin/migration` shows it (SPEC 12). */
export interface RouteStageView {
  stage: string
  stageSource: 'config' | 'override'
  canary: { percent: number; allow: string[]; deny: string[] } | null
}

/** A tenant's overrides as SPEC 12 lists them: each with `suspended` (why it is not applied, or null). */
export type OverrideView = StoredStageOverride & { suspended: string | null }

/** The effective stage of one configured route at `nowMs`, with its source and, in stage canary, the canary. */
export function routeStageView(runtime: GatewayRuntime, tenantName: string, label: string, nowMs: number): RouteStageView {
  const tenant = runtime.tenancy.tenants.get(tenantName)
  const configured = tenant?.migration.get(label)
  if (tenant === undefined || configured === undefined) return { stage: 'translate', stageSource: 'config', canary: null }
  const effective = resolveEffectiveStage(configured, tenant.legacyOrigin !== undefined, runtime.stageOverrides, tenantName, label, nowMs)
  const canary = effective.stage === 'canary' ? { percent: configured.canary.percent, allow: [...configured.canary.allow], deny: [...configured.canary.deny] } : null
  return { stage: effective.stage, stageSource: effective.source, canary }
}

/**
 * A tenant's stage (SPEC 12's tenant `stage`): its override when one applies, else its configured
 * `migration.stage`, else `translate`; and its overrides, tenant-wide and per route, with why each
 * suspended one is not applied.
 */
export function tenantStageView(runtime: GatewayRuntime, records: StageOverrideRecords, tenantName: string, nowMs: number): { stage: string; overrides: OverrideView[] } {
  const overrides = records
    .list(nowMs)
    .filter((override) => override.tenant === tenantName)
    .map((override) => ({ ...override, suspended: suspendedReason(runtime, override) }))
  const configured = runtime.config.tenants[tenantName]?.migration.stage ?? 'translate'
  // The stage of a route that sets none of its own: the tenant-wide override where it applies to
  // such a route (SPEC 14: each route is judged alone), even when the config disallows it on others.
  const hasLegacy = runtime.tenancy.tenants.get(tenantName)?.legacyOrigin !== undefined
  const tenantWide = overrides.find((override) => override.route === null && isAllowedOverride(configured, override.stage, hasLegacy))
  return { stage: tenantWide?.stage ?? configured, overrides }
}
