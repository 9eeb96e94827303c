import type { GatewayConfig } from '../config/schema.js'
import { BrownoutPauses } from './brownout-pauses.js'
import type { TenancyRuntime } from './resolve-tenant.js'
import { buildTenantRuntime } from './tenant-runtime.js'

/**
 * Everything a request needs from the config, resolved once and frozen. A reload builds a new
 * one and swaps it in whole, so a request sees one config from start to end.
 */
export interface GatewayRuntime {
  readonly config: GatewayConfig
  readonly tenancy: TenancyRuntime
  /** `internalAdmin.pathPrefixes`, lower-cased for comparison with normalised paths. */
  readonly blockedPrefixes: readonly string[]
  /** SPEC 13 pauses: the process's, handed from runtime to runtime so that a reload keeps them. */
  readonly brownoutPauses: BrownoutPauses
}

export function buildGatewayRuntime(config: GatewayConfig, embeddedOrigin: string | undefined, brownoutPauses: BrownoutPauses = new BrownoutPauses()): GatewayRuntime {
  const tenants = new Map(Object.entries(config.tenants).map(([name, tenant]) => [name, buildTenantRuntime(name, tenant, embeddedOrigin)]))
  return Object.freeze({
    config,
    tenancy: Object.freeze({
      header: config.tenancy.header,
      hosts: new Map(Object.entries(config.tenancy.hosts).map(([host, tenant]) => [host.toLowerCase(), tenant])),
      defaultTenant: config.tenancy.default,
      tenants
    }),
    blockedPrefixes: Object.freeze(config.internalAdmin.pathPrefixes.map((prefix) => prefix.toLowerCase())),
    brownoutPauses
  })
}
