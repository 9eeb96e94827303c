import { EMBEDDED_UPSTREAM, type GatewayConfig, type LegacyFields, type TenantConfig } from '../config/schema.js'
import { compileRoutes, type CompiledRoute } from '../legacy/route-table.js'

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
  /** RFC 9745 / RFC 8594 headers for legacy responses, or null. */
  readonly deprecationHeaders: Readonly<Record<string, string>> | null
  readonly fallback: 'reject' | 'proxy'
}

export function buildDeprecationHeaders(deprecation: TenantConfig['legacy']['deprecation']): Record<string, string> | null {
  if (deprecation === null) return null
  const headers: Record<string, string> = { deprecation: `@${Math.floor(Date.parse(deprecation.date) / 1000)}` }
  if (deprecation.sunset !== undefined) headers.sunset = new Date(deprecation.sunset).toUTCString()
  // WHATWG serialisation percent-encodes what a header value cannot carry (e.g. a non-ASCII path).
  if (deprecation.link !== undefined) headers.link = `<${new URL(deprecation.link).href}>; rel="deprecation"`
  return headers
}

/** The upstream a tenant's calls go to: staging unless its config says production (SPEC 3). */
export function selectUpstreamUrl(tenant: TenantConfig): string {
  return tenant.upstream.target === 'production' && tenant.upstream.production !== null ? tenant.upstream.production : tenant.upstream.staging
}

export function usesEmbeddedUpstream(config: GatewayConfig): boolean {
  return Object.values(config.tenants).some((tenant) => selectUpstreamUrl(tenant) === EMBEDDED_UPSTREAM)
}

export function buildTenantRuntime(name: string, tenant: TenantConfig, embeddedOrigin: string | undefined): TenantRuntime {
  const url = selectUpstreamUrl(tenant)
  if (url === EMBEDDED_UPSTREAM && embeddedOrigin === undefined) {
    throw new Error(`tenant ${name} uses the embedded simulator, but none is running`)
  }
  return Object.freeze({
    name,
    upstreamTarget: tenant.upstream.target,
    upstreamOrigin: url === EMBEDDED_UPSTREAM ? (embeddedOrigin as string) : new URL(url).origin,
    routes: Object.freeze(compileRoutes(tenant.legacy.routes)),
    fields: tenant.legacy.fields,
    unknownFields: tenant.legacy.unknownFields,
    responseFields: tenant.legacy.responseFields,
    deprecationHeaders: buildDeprecationHeaders(tenant.legacy.deprecation),
    fallback: tenant.fallback
  })
}
