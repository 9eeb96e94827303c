import type { ClientRegistry } from '../fleet/client-registry.js'
import { headerValueText } from '../util/header-value-bytes.js'
import { ANONYMOUS } from '../credentials/client-id.js'
import type { RequestHead } from '../kernel/request-head.js'
import type { AccessRecord } from '../observability/access-record.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'

/**
 * A finished request into SPEC 12's client registry: a legacy one (brownout and gone answers
 * included) under its tenant, route and client id, a native one in its tenant's legacy share.
 * Memory only; a request that names no client (SPEC 12's sources give nothing) counts as `anonymous`.
 */
export function recordInRegistry(registry: ClientRegistry, runtime: GatewayRuntime, head: RequestHead, record: Readonly<AccessRecord>): void {
  const tenant = record.tenant
  if (tenant === undefined) return
  if (record.legacyRoute !== undefined) {
    const clientId = record.clientId ?? ANONYMOUS
    const userAgent = head.headers['user-agent']
    registry.recordLegacy({
      tenant,
      route: record.legacyRoute,
      clientId,
      // Shown in reports as the client wrote it: Node holds a header's bytes, one character each.
      userAgent: userAgent === undefined ? undefined : headerValueText(userAgent),
      // As the request's own config said (SPEC 17: a request finishes under the config it started with); else the current one's.
      exempt: record.clientExempt ?? isExempt(runtime, tenant, record.legacyRoute, clientId, head.now),
      brownout: record.deprecationAction === 'brownout',
      atMs: head.now
    })
  } else if (record.trafficClass === 'native') {
    registry.recordNative(tenant, head.now)
  }
}

/** SPEC 12's `lastSeenNonExempt`: whether the client had an exemption in force (SPEC 13) when it called, window or not. */
function isExempt(runtime: GatewayRuntime, tenant: string, route: string, clientId: string, nowMs: number): boolean {
  const untilMs = runtime.tenancy.tenants.get(tenant)?.deprecation.get(route)?.exemptUntilMs.get(clientId)
  return untilMs !== undefined && untilMs > nowMs
}
