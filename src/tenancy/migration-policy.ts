import { MIGRATION_STAGES, STAGES_NEEDING_LEGACY, type CanaryConfig, type MigrationStage, type TenantConfig } from '../config/schema.js'

/**
 * SPEC 14 for one tenant's legacy route, resolved at load so that a request in stage `translate`
 * pays one map lookup: the configured stage (the route's, else the tenant's, else `translate`)
 * and the canary with its percentage as a bucket bound and its lists as sets.
 */
export interface RouteMigration {
  readonly stage: MigrationStage
  /** Which key set the stage: the route's entry, the tenant's `migration.stage`, or neither (the default). */
  readonly stageFrom: 'route' | 'tenant' | 'default'
  readonly canary: CanaryPolicy
}

export interface CanaryPolicy {
  readonly percent: number
  /** A client is in the canary when its bucket is below this (`percent × 100`, SPEC 13's formula). */
  readonly bucketBound: number
  readonly allow: ReadonlySet<string>
  readonly deny: ReadonlySet<string>
}

/** One stage override (SPEC 14, `PUT /admin/migration/stage`), as the planner reads it. */
export interface StageOverride {
  readonly stage: MigrationStage
  /** `METHOD /path`, or null for the whole tenant. */
  readonly route: string | null
  readonly reason: string
  readonly until: string
}

/**
 * Where the planner reads overrides from, from memory (SPEC 12: no request waits on the store).
 * It answers one scope at a time, a route's own or the tenant's (`route` null), since SPEC 14's
 * precedence depends on whether the config allows each (resolveEffectiveStage).
 */
export interface StageOverrides {
  inForce(tenant: string, route: string | null, nowMs: number): StageOverride | undefined
}

/** No overrides: what every runtime has until `PUT /admin/migration/stage` is built. */
export const NO_STAGE_OVERRIDES: StageOverrides = Object.freeze({ inForce: () => undefined })

/** SPEC 14's effective stage of a request and where it comes from (`/admin/migration`'s `stageSource`). */
export interface EffectiveStage {
  readonly stage: MigrationStage
  readonly source: 'config' | 'override'
  /** The override applied, when one was. */
  readonly override?: StageOverride
}

const STAGE_ORDER: ReadonlyMap<string, number> = new Map(MIGRATION_STAGES.map((stage, index) => [stage, index]))

/**
 * SPEC 14: the first of route override, tenant override, route config, tenant config, `translate`.
 * An override applies only while the config allows it (an earlier or equal stage than the
 * configured one, and `upstream.legacy` for the stages that need it); otherwise it is suspended,
 * never misapplied, and the next in that order serves: a suspended route override leaves the
 * tenant's override in force.
 */
export function resolveEffectiveStage(configured: RouteMigration, hasLegacy: boolean, overrides: StageOverrides, tenant: string, route: string, nowMs: number): EffectiveStage {
  const own = overrides.inForce(tenant, route, nowMs)
  if (own !== undefined && isAllowedOverride(configured.stage, own.stage, hasLegacy)) return { stage: own.stage, source: 'override', override: own }
  const tenantWide = overrides.inForce(tenant, null, nowMs)
  if (tenantWide !== undefined && isAllowedOverride(configured.stage, tenantWide.stage, hasLegacy)) return { stage: tenantWide.stage, source: 'override', override: tenantWide }
  return configured.stage === 'translate' ? TRANSLATE_FROM_CONFIG : { stage: configured.stage, source: 'config' }
}

/** Whether an override to `stage` may apply to a route configured in `configured` (SPEC 14: only back, never forward). */
export function isAllowedOverride(configured: MigrationStage, stage: MigrationStage, hasLegacy: boolean): boolean {
  return (STAGE_ORDER.get(stage) as number) <= (STAGE_ORDER.get(configured) as number) && (hasLegacy || !STAGES_NEEDING_LEGACY.has(stage))
}

const TRANSLATE_FROM_CONFIG: EffectiveStage = Object.freeze({ stage: 'translate', source: 'config' })

const NO_CANARY: CanaryPolicy = Object.freeze({ percent: 0, bucketBound: 0, allow: new Set<string>(), deny: new Set<string>() })

/**
 * Whether a tenant uses stages (SPEC 14: it sets `upstream.legacy` or a `migration` block), and
 * so gets `x-v4gw-served-by` on its legacy answers: any key of the block counts, a route's
 * deprecation or idempotency alone included (docs/decisions.md). An empty block sets nothing.
 */
export function tenantUsesStages(tenant: TenantConfig): boolean {
  const migration = tenant.migration
  return (
    tenant.upstream.legacy != null ||
    migration.stage !== undefined ||
    migration.canary !== undefined ||
    migration.shadow !== undefined ||
    Object.keys(migration.routes).length > 0
  )
}

/** SPEC 14 per legacy route (`METHOD /path`): the configured stage and canary, the route's merged over the tenant's. */
export function buildRouteMigrations(tenant: TenantConfig): Map<string, RouteMigration> {
  const migration = tenant.migration
  const tenantCanary = migration.canary == null ? NO_CANARY : buildCanaryPolicy(migration.canary)
  const tenantStage: RouteMigration = Object.freeze({ stage: migration.stage ?? 'translate', stageFrom: migration.stage === undefined ? 'default' : 'tenant', canary: tenantCanary })
  const routes = new Map<string, RouteMigration>()
  for (const route of tenant.legacy.routes) {
    const label = `${route.method} ${route.path}`
    const entry = migration.routes[label]
    if (entry === undefined || (entry.stage === undefined && entry.canary === undefined)) {
      routes.set(label, tenantStage)
      continue
    }
    // One level deep (SPEC 14): a key the route gives replaces the tenant's; null removes it.
    const stage = entry.stage === undefined ? tenantStage.stage : (entry.stage ?? 'translate')
    const stageFrom = entry.stage === undefined ? tenantStage.stageFrom : entry.stage === null ? 'default' : 'route'
    let canary = tenantCanary
    if (entry.canary === null) canary = NO_CANARY
    else if (entry.canary !== undefined) {
      const base = migration.canary ?? { percent: 0, allow: [], deny: [] }
      // A key left out is the tenant's; one set to null removes it (SPEC 14): 0 %, no list.
      const pick = <T>(own: T | null | undefined, tenant: T, none: T): T => (own === undefined ? tenant : own === null ? none : own)
      canary = buildCanaryPolicy({ percent: pick(entry.canary.percent, base.percent, 0), allow: pick(entry.canary.allow, base.allow, []), deny: pick(entry.canary.deny, base.deny, []) })
    }
    routes.set(label, Object.freeze({ stage, stageFrom, canary }))
  }
  return routes
}

function buildCanaryPolicy(canary: CanaryConfig): CanaryPolicy {
  return Object.freeze({ percent: canary.percent, bucketBound: Math.round(canary.percent * 100), allow: new Set(canary.allow), deny: new Set(canary.deny) })
}
