import { GatewayError } from '../errors/registry.js'
import type { TrafficClass } from '../observability/access-record.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import { matchRoute, type RouteMatch } from '../legacy/route-table.js'
import { resolveTenant } from '../tenancy/resolve-tenant.js'
import type { TenantRuntime } from '../tenancy/tenant-runtime.js'
import { parseRequestTarget, type RequestTarget } from './request-target.js'

export type Classification =
  | { trafficClass: 'legacy'; tenant: TenantRuntime; target: RequestTarget; match: RouteMatch }
  | { trafficClass: 'native'; tenant: TenantRuntime; target: RequestTarget }
  /** Unknown traffic of a tenant with `fallback: proxy`: streamed like native. */
  | { trafficClass: 'unknown'; tenant: TenantRuntime; target: RequestTarget }

export interface ClassifiedHead {
  method: string
  url: string
  headers: Record<string, string | string[] | undefined>
}

/** What is known so far, kept even when classification throws: the access log reports it. */
export interface ClassificationNote {
  trafficClass: TrafficClass | undefined
  tenant: string | undefined
  /** The tenant asked for, when it is not configured: for the access line, never for the answer. */
  requestedTenant?: string | undefined
}

/**
 * SPEC 2/3: a path under a blocked prefix is answered 403 and never forwarded. Checked on the
 * client's path and again on a proxy route's rewritten one, which a path parameter fills in.
 */
export function assertNotBlocked(runtime: GatewayRuntime, target: Pick<RequestTarget, 'comparablePath' | 'octetPath'>, note: ClassificationNote): void {
  const prefixes = runtime.blockedPrefixes
  if (underAny(prefixes, target.comparablePath) || (target.octetPath !== undefined && underAny(prefixes, target.octetPath))) {
    note.trafficClass = 'blocked'
    throw new GatewayError('FORBIDDEN', 'this path belongs to the internal platform-admin surface and is never forwarded')
  }
}

function underAny(prefixes: readonly string[], path: string): boolean {
  for (let index = 0; index < prefixes.length; index++) if (path.startsWith(prefixes[index] as string)) return true
  return false
}

/** Which of SPEC 2's classes a request is, and for whom; blocked and unroutable requests throw their SPEC 6 error. */
export function classifyRequest(runtime: GatewayRuntime, head: ClassifiedHead, note: ClassificationNote): Classification {
  const target = parseRequestTarget(head.url)
  assertNotBlocked(runtime, target, note)
  const tenantHeader = head.headers[runtime.tenancy.header]
  const host = head.headers.host
  const tenant = resolveTenant(
    runtime.tenancy,
    Array.isArray(tenantHeader) ? tenantHeader.join(',') : tenantHeader,
    Array.isArray(host) ? host[0] : host,
    note
  )
  note.tenant = tenant.name
  const match = matchRoute(tenant.routes, head.method, target.pathname)
  if (match !== undefined) return { trafficClass: 'legacy', tenant, target, match }
  if (target.pathname.startsWith('/v4/')) return { trafficClass: 'native', tenant, target }
  note.trafficClass = 'unknown'
  if (tenant.fallback === 'proxy') return { trafficClass: 'unknown', tenant, target }
  throw new GatewayError('ROUTE_NOT_FOUND', 'no legacy route or V4 path matches this request')
}
