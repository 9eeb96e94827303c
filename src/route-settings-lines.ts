import { describeDeprecation, effectiveDeprecation } from './config/deprecation.js'
import type { TenantConfig } from './config/schema.js'
import { effectiveShadow } from './config/shadow-config.js'
import { buildRouteMigrations, tenantUsesStages } from './tenancy/migration-policy.js'
import { routeIdempotency } from './tenancy/tenant-runtime.js'

/**
 * What `check-config` prints under each legacy route: its effective settings, the route's entry in
 * `migration.routes` merged over the tenant's (SPEC 14: "check-config prints every route's
 * effective settings"). A setting the tenant does not use at all (no stages, no idempotency) is
 * left out, so a config written for sections 1-11 prints as before.
 */
export function routeSettingsLines(tenant: TenantConfig, nowMs: number): Map<string, string[]> {
  const usesStages = tenantUsesStages(tenant)
  const migrations = buildRouteMigrations(tenant)
  const idempotency = routeIdempotency(tenant)
  const anyIdempotency = [...idempotency.values()].some((settings) => settings !== null)
  const lines = new Map<string, string[]>()
  for (const route of tenant.legacy.routes) {
    const label = `${route.method} ${route.path}`
    const entry = tenant.migration.routes[label]
    const own: string[] = []
    const migration = migrations.get(label)
    if (usesStages && migration !== undefined) {
      own.push(`stage ${migration.stage} (${migration.stageFrom === 'route' ? "the route's" : migration.stageFrom === 'tenant' ? "the tenant's" : 'the default'})`)
      const { canary } = migration
      if (canary.percent > 0 || canary.allow.size > 0 || canary.deny.size > 0) own.push(`canary ${canary.percent}% of clients, allow ${canary.allow.size}, deny ${canary.deny.size}`)
      // SPEC 15: only a translated route is compared; its settings matter in stage shadow (configured, or an override's).
      if (route.action !== 'proxy' && (migration.stage === 'shadow' || tenant.migration.shadow != null || entry?.shadow != null)) {
        if (entry?.shadow === null) own.push("shadow: the tenant's block removed for this route, so the defaults apply")
        const shadow = effectiveShadow(tenant.migration.shadow, entry?.shadow)
        own.push(
          `shadow ${shadow.percent}% to ${shadow.upstream}, timeout ${shadow.timeoutMs} ms, at most ${shadow.maxInFlight} in flight, answers up to ${shadow.maxBodyBytes} bytes` +
            `, credentials ${shadow.upstream === tenant.upstream.target || shadow.forwardCredentials ? 'forwarded' : 'not forwarded (skipped)'}, ${shadow.ignore.length} ignored pointer(s)`
        )
      }
    }
    if (anyIdempotency && route.action !== 'proxy') {
      const settings = idempotency.get(label) ?? null
      // SPEC 16 is for the translation side: a route the legacy upstream serves for every client keys nothing.
      const unused = migration !== undefined && (migration.stage === 'legacy' || migration.stage === 'shadow') ? ' (unused while the legacy upstream serves this route)' : ''
      own.push(
        settings === null
          ? 'idempotency off'
          : `idempotency on: key header ${settings.keyHeader}, kept ${settings.ttlMs} ms, duplicates wait ${settings.waitMs} ms, answers kept up to ${settings.maxBodyBytes} bytes, ${settings.forwardHeader === null ? 'key not sent to V4' : `key sent to V4 in ${settings.forwardHeader}`}${unused}`
      )
    }
    // A route's own deprecation (SPEC 14's merge over the tenant's); without one the tenant's, printed above it, applies.
    if (entry?.deprecation !== undefined) {
      const effective = effectiveDeprecation(tenant.legacy.deprecation, entry.deprecation) ?? null
      if (effective === null) own.push('no deprecation on this route')
      else own.push(...describeDeprecation(effective, nowMs))
    } else if (tenant.legacy.deprecation !== null && own.length > 0) own.push("deprecation: the tenant's")
    lines.set(label, own)
  }
  return lines
}
