import { GatewayError } from '../errors/registry.js'
import { canonicalHost } from '../util/host-syntax.js'
import { normalizeHost } from '../util/normalize-host.js'
import type { TenantRuntime } from './tenant-runtime.js'

export interface TenancyRuntime {
  readonly header: string
  readonly hosts: ReadonlyMap<string, string>
  readonly defaultTenant: string | null
  readonly tenants: ReadonlyMap<string, TenantRuntime>
}

/**
 * Tenant header, then `Host` map, then the default (SPEC 3). Messages never echo the
 * requested name: it is client input. An unknown one goes on `asked`, for the operator's access
 * line (SPEC 17).
 */
export function resolveTenant(
  tenancy: TenancyRuntime,
  tenantHeader: string | undefined,
  host: string | undefined,
  asked?: { requestedTenant?: string | undefined }
): TenantRuntime {
  let name: string | null | undefined = tenantHeader === '' ? undefined : tenantHeader
  let source: 'header' | 'host' | 'default' = 'header'
  // No Host map (the usual single-tenant or header-only setup): nothing to normalise the Host for.
  if (name === undefined && tenancy.hosts.size > 0) {
    // An IPv6 literal in one spelling, as the keys are (config/schema.ts: checkHostKeys).
    name = tenancy.hosts.get(canonicalHost(normalizeHost(host) ?? ''))
    source = 'host'
  }
  if (name === undefined) {
    name = tenancy.defaultTenant
    source = 'default'
  }
  if (name === null) {
    throw new GatewayError('TENANT_REQUIRED', `no tenant: send the ${tenancy.header} header`, { details: [{ pointer: `header:${tenancy.header}`, message: 'missing' }] })
  }
  const tenant = tenancy.tenants.get(name)
  if (tenant === undefined) {
    if (asked !== undefined) asked.requestedTenant = name
    const pointer = source === 'header' ? `header:${tenancy.header}` : source === 'host' ? 'header:host' : 'tenancy.default'
    throw new GatewayError('TENANT_UNKNOWN', 'the requested tenant is not configured', { details: [{ pointer, message: 'not a configured tenant' }] })
  }
  return tenant
}
