import { STAGES_NEEDING_LEGACY, type MigrationStage } from '../config/schema.js'
import { GatewayError } from '../errors/registry.js'
import type { FleetScope } from '../fleet/fleet-records.js'
import type { GatewayRuntime } from './gateway-runtime.js'
import { isAllowedOverride } from './migration-policy.js'
import type { StageOverrideRecords, StoredStageOverride } from './stage-override-records.js'
import type { TenantRuntime } from './tenant-runtime.js'

/** What `PUT /admin/migration/stage` takes (SPEC 14), once its JSON is read. */
export interface StageOverrideRequest {
  tenant: string
  route?: string | null | undefined
  stage: MigrationStage
  reason: string
  until?: string | undefined
}

/** SPEC 14: `until` defaults to 24 h from now and may be at most 30 days ahead. */
const DEFAULT_OVERRIDE_MS = 24 * 3_600_000
export const MAX_OVERRIDE_MS = 30 * 24 * 3_600_000

/**
 * SPEC 14's rollback, checked against the running config: an override may only move a route to
 * an earlier or equal stage than its configured one, and to a stage that needs `upstream.legacy`
 * only on a tenant that has one; a tenant-wide override is refused when it would move any of
 * the tenant's routes forward. Stages move forward only through the config.
 */
export async function setStageOverride(
  runtime: GatewayRuntime,
  records: StageOverrideRecords,
  request: StageOverrideRequest,
  nowMs: number
): Promise<{ override: StoredStageOverride; scope: FleetScope }> {
  const tenant = knownTenant(runtime, request.tenant)
  const route = knownRoute(tenant, request.route ?? null)
  const hasLegacy = tenant.legacyOrigin !== undefined
  const routes = route === null ? [...tenant.migration.keys()] : [route]
  for (const label of routes) {
    const configured = tenant.migration.get(label)?.stage ?? 'translate'
    if (!isAllowedOverride(configured, request.stage, hasLegacy)) {
      throw new GatewayError('INVALID_REQUEST', refusalOf(label, configured, request.stage, hasLegacy), { details: [{ pointer: '/stage', message: 'an earlier or equal stage than the configured one' }] })
    }
  }
  const untilMs = request.until === undefined ? nowMs + DEFAULT_OVERRIDE_MS : Date.parse(request.until)
  if (!(untilMs > nowMs) || untilMs - nowMs > MAX_OVERRIDE_MS) {
    throw new GatewayError('INVALID_REQUEST', 'until must be ahead, and at most 30 days ahead', { details: [{ pointer: '/until', message: 'ahead, at most 30 days' }] })
  }
  const override: StoredStageOverride = {
    tenant: tenant.name,
    route,
    stage: request.stage,
    reason: request.reason,
    setAt: new Date(nowMs).toISOString(),
    until: new Date(untilMs).toISOString()
  }
  return { override, scope: await records.set(override) }
}

/** `DELETE /admin/migration/stage`: the tenant's override, one route's, or (`all`) every one of the tenant's. */
export async function removeStageOverrides(
  runtime: GatewayRuntime,
  records: StageOverrideRecords,
  target: { tenant: string; route: string | null; all: boolean },
  nowMs: number
): Promise<{ removed: StoredStageOverride[]; scope: FleetScope }> {
  // Chosen from the store's state, not a copy up to a refresh old (one just set elsewhere would be missed).
  await records.current()
  const listed = records.list(nowMs).filter((override) => override.tenant === target.tenant)
  const chosen = target.all ? listed : listed.filter((override) => override.route === target.route)
  // An override of a tenant or route the config no longer has may still be removed; with none
  // chosen, the tenant and route must be the config's (SPEC 14: 404 for either unknown).
  if (chosen.length === 0) {
    const tenant = knownTenant(runtime, target.tenant)
    if (target.route !== null) knownRoute(tenant, target.route)
  }
  const removed: StoredStageOverride[] = []
  let scope = records.scope()
  for (const override of chosen) {
    const result = await records.remove(override.tenant, override.route, nowMs)
    if (result.removed !== undefined) removed.push(result.removed)
    scope = result.scope
  }
  return { removed, scope }
}

/**
 * SPEC 14: why an override is not applied under the running config, or null when it is (for a
 * tenant-wide one: on every route). Listed as `suspended` until its `until`.
 */
export function suspendedReason(runtime: GatewayRuntime, override: StoredStageOverride): string | null {
  const tenant = runtime.tenancy.tenants.get(override.tenant)
  if (tenant === undefined) return 'the tenant is not in the running config'
  if (override.route !== null && !tenant.migration.has(override.route)) return 'the route is not in the running config'
  const hasLegacy = tenant.legacyOrigin !== undefined
  const routes = override.route === null ? [...tenant.migration.keys()] : [override.route]
  const refused = routes.filter((label) => !isAllowedOverride(tenant.migration.get(label)?.stage ?? 'translate', override.stage, hasLegacy))
  if (refused.length === 0) return null
  const why = !hasLegacy && STAGES_NEEDING_LEGACY.has(override.stage) ? 'the tenant has no upstream.legacy' : 'the config sets an earlier stage'
  return `not applied to ${refused.join(', ')}: ${why}`
}

function refusalOf(route: string, configured: MigrationStage, stage: MigrationStage, hasLegacy: boolean): string {
  if (!hasLegacy && STAGES_NEEDING_LEGACY.has(stage)) return `stage ${stage} needs upstream.legacy, which the tenant does not set`
  return `${route} is configured in stage ${configured}: an override may only move it back (legacy < shadow < canary < translate < native-only)`
}

function knownTenant(runtime: GatewayRuntime, name: string): TenantRuntime {
  const tenant = runtime.tenancy.tenants.get(name)
  if (tenant === undefined) throw new GatewayError('TENANT_UNKNOWN', 'no such tenant is configured')
  return tenant
}

function knownRoute(tenant: TenantRuntime, route: string | null): string | null {
  if (route !== null && !tenant.migration.has(route)) throw new GatewayError('ROUTE_NOT_FOUND', 'the tenant has no such legacy route ("METHOD /path" as in its route table)')
  return route
}
