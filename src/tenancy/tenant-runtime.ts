import { EMBEDDED_UPSTREAM, IDEMPOTENCY_DEFAULTS, type GatewayConfig, type IdempotencyConfig, type LegacyFields, type TenantConfig } from '../config/schema.js'
import { effectiveDeprecation } from '../config/deprecation.js'
import { compileRoutes, type CompiledRoute } from '../legacy/route-table.js'
import { compileClientKey, type ClientKeySource } from '../credentials/client-id.js'
import { buildDeprecationPolicy, type DeprecationPolicy } from './deprecation-policy.js'
import { buildRouteMigrations, tenantUsesStages, type RouteMigration } from './migration-policy.js'

export { buildDeprecationHeaders } from './deprecation-policy.js'

/** A tenant resolved into plain decisions before anything is wired (SPEC 3, 4, 6). */
export interface TenantRuntime {
  readonly name: string
  readonly upstreamTarget: 'staging' | 'production'
  /** scheme://host:port of the target upstream; never taken from a request. */
  readonly upstreamOrigin: string
  readonly routes: readonly CompiledRoute[]
  readonly fields: LegacyFields
  readonly unknownFields: 'keep' | 'drop'
  readonly responseFields: readonly { from: string; to: string }[]
  /** SPEC 13 per legacy route (`METHOD /path`): the tenant's deprecation with the route's merged over it (SPEC 14), or null. */
  readonly deprecation: ReadonlyMap<string, DeprecationPolicy | null>
  /** SPEC 16 per translated legacy route (`METHOD /path`): the tenant's settings with the route's merged over them, or null (off). */
  readonly idempotency: ReadonlyMap<string, IdempotencyConfig | null>
  /** SPEC 14: scheme://host:port of `upstream.legacy` (the embedded legacy backend's for `embedded`), or undefined. */
  readonly legacyOrigin: string | undefined
  /** SPEC 14: the tenant sets `upstream.legacy` or a stage or canary, so its legacy answers say who served them. */
  readonly usesStages: boolean
  /** SPEC 14 per legacy route (`METHOD /path`): its configured stage and canary. */
  readonly migration: ReadonlyMap<string, RouteMigration>
  /** SPEC 12: where a legacy request's client id comes from, in order. */
  readonly clientKey: readonly ClientKeySource[]
  readonly fallback: 'reject' | 'proxy'
}

/** The upstream a tenant's calls go to: staging unless its config says production (SPEC 3). */
export function selectUpstreamUrl(tenant: TenantConfig): string {
  return tenant.upstream.target === 'production' && tenant.upstream.production !== null ? tenant.upstream.production : tenant.upstream.staging
}

export function usesEmbeddedUpstream(config: GatewayConfig): boolean {
  return Object.values(config.tenants).some((tenant) => selectUpstreamUrl(tenant) === EMBEDDED_UPSTREAM)
}

/** SPEC 14.1: whether a tenant's `upstream.legacy` is the embedded legacy backend. */
export function usesEmbeddedLegacy(config: GatewayConfig): boolean {
  return Object.values(config.tenants).some((tenant) => tenant.upstream.legacy === EMBEDDED_UPSTREAM)
}

export function buildTenantRuntime(name: string, tenant: TenantConfig, embeddedOrigin: string | undefined, embeddedLegacyOrigin?: string): TenantRuntime {
  const url = selectUpstreamUrl(tenant)
  if (url === EMBEDDED_UPSTREAM && embeddedOrigin === undefined) {
    throw new Error(`tenant ${name} uses the embedded simulator, but none is running`)
  }
  const legacy = tenant.upstream.legacy
  if (legacy === EMBEDDED_UPSTREAM && embeddedLegacyOrigin === undefined) {
    throw new Error(`tenant ${name} uses the embedded legacy backend, but none is running`)
  }
  return Object.freeze({
    name,
    upstreamTarget: tenant.upstream.target,
    upstreamOrigin: url === EMBEDDED_UPSTREAM ? (embeddedOrigin as string) : new URL(url).origin,
    routes: Object.freeze(compileRoutes(tenant.legacy.routes)),
    fields: tenant.legacy.fields,
    unknownFields: tenant.legacy.unknownFields,
    responseFields: tenant.legacy.responseFields,
    deprecation: routeDeprecations(tenant),
    idempotency: routeIdempotency(tenant),
    legacyOrigin: legacy == null ? undefined : legacy === EMBEDDED_UPSTREAM ? embeddedLegacyOrigin : new URL(legacy).origin,
    usesStages: tenantUsesStages(tenant),
    migration: buildRouteMigrations(tenant),
    clientKey: compileClientKey(tenant.clients.key),
    fallback: tenant.fallback
  })
}

function routeDeprecations(tenant: TenantConfig): Map<string, DeprecationPolicy | null> {
  const policies = new Map<string, DeprecationPolicy | null>()
  // One policy shared by the routes that do not set their own.
  const tenantPolicy = buildDeprecationPolicy(tenant.legacy.deprecation)
  for (const route of tenant.legacy.routes) {
    const label = `${route.method} ${route.path}`
    const own = tenant.migration.routes[label]?.deprecation
    // The schema refused a route entry without a date to be had (effectiveDeprecation's undefined).
    policies.set(label, own === undefined ? tenantPolicy : buildDeprecationPolicy(effectiveDeprecation(tenant.legacy.deprecation, own) ?? null))
  }
  return policies
}

/** SPEC 16: only the translated routes (`execute`, `session-execute`) have any; a route's entry merges over the tenant's key by key, null turns it off. */
export function routeIdempotency(tenant: TenantConfig): Map<string, IdempotencyConfig | null> {
  const settings = new Map<string, IdempotencyConfig | null>()
  const tenantSettings = tenant.legacy.idempotency
  for (const route of tenant.legacy.routes) {
    if (route.action === 'proxy') continue
    const label = `${route.method} ${route.path}`
    const own = tenant.migration.routes[label]?.idempotency
    if (own === undefined) settings.set(label, tenantSettings)
    else if (own === null) settings.set(label, null)
    else {
      const merged: Record<string, unknown> = { ...(tenantSettings ?? IDEMPOTENCY_DEFAULTS) }
      // A key set to null takes the tenant's value away: SPEC 16's default.
      for (const [key, value] of Object.entries(own)) if (value !== undefined) merged[key] = value === null ? IDEMPOTENCY_DEFAULTS[key as keyof IdempotencyConfig] : value
      settings.set(label, Object.freeze(merged as unknown as IdempotencyConfig))
    }
  }
  return settings
}
