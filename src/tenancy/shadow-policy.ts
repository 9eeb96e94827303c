import { EMBEDDED_UPSTREAM } from '../config/schema.js'
import { effectiveShadow, type ShadowSettings } from '../config/shadow-config.js'
import { compileIgnoreList, type IgnoreList } from '../util/shadow-compare.js'
import type { GatewayRuntime } from './gateway-runtime.js'
import type { TenantRuntime } from './tenant-runtime.js'

/** SPEC 15's settings of one legacy route, resolved once per runtime into what a comparison needs. */
export interface ShadowPolicy {
  readonly settings: Readonly<ShadowSettings>
  /** `ignore` and the always-ignored pointers, compiled. */
  readonly ignore: IgnoreList
  /** scheme://host:port of `shadow.upstream`: the only upstream a comparison calls. */
  readonly origin: string
  /**
   * False when `shadow.upstream` is another V4 upstream than `upstream.target` and
   * `forwardCredentials` is not set: the client's credential may not go there (`skipped`).
   */
  readonly mayForwardCredentials: boolean
  /** `percent × 100`: a request (execute) or state (session-execute) whose bucket is below it is compared. */
  readonly sampleBound: number
}

const cache = new WeakMap<GatewayRuntime, Map<string, ShadowPolicy>>()

/**
 * The shadow policy of a tenant's legacy route under `runtime` (its config merged as SPEC 14
 * says), made once per runtime and route: a reload makes a new runtime, so a comparison keeps the
 * policy it started with.
 */
export function shadowPolicyFor(runtime: GatewayRuntime, tenant: TenantRuntime, route: string): ShadowPolicy {
  let policies = cache.get(runtime)
  if (policies === undefined) {
    policies = new Map()
    cache.set(runtime, policies)
  }
  const key = `${tenant.name}\u0000${route}`
  let policy = policies.get(key)
  if (policy === undefined) {
    policy = buildShadowPolicy(runtime, tenant, route)
    policies.set(key, policy)
  }
  return policy
}

function buildShadowPolicy(runtime: GatewayRuntime, tenant: TenantRuntime, route: string): ShadowPolicy {
  const config = runtime.config.tenants[tenant.name]
  if (config === undefined) throw new Error(`tenant ${tenant.name} is not in the runtime's config`)
  const settings = Object.freeze(effectiveShadow(config.migration.shadow, config.migration.routes[route]?.shadow))
  const url = settings.upstream === 'production' ? config.upstream.production : config.upstream.staging
  const sameAsTarget = settings.upstream === tenant.upstreamTarget
  // The config refuses an embedded shadow upstream that is not the target (config/shadow-config.ts).
  const origin = sameAsTarget || url === null || url === EMBEDDED_UPSTREAM ? tenant.upstreamOrigin : new URL(url).origin
  return Object.freeze({
    settings,
    ignore: compileIgnoreList(settings.ignore),
    origin,
    mayForwardCredentials: sameAsTarget || settings.forwardCredentials,
    sampleBound: Math.round(settings.percent * 100)
  })
}
