import { GatewayError } from '../errors/registry.js'
import type { FleetScope } from '../fleet/fleet-records.js'
import { MAX_PAUSE_MS, type BrownoutPause } from './brownout-pauses.js'
import type { GatewayRuntime } from './gateway-runtime.js'

/** What `POST /admin/brownouts/pause` takes (SPEC 13), once its JSON is read. */
export interface PauseRequest {
  tenant: string
  route?: string | null | undefined
  until: string
  reason: string
}

/**
 * SPEC 13's pause, checked against the running config: an unknown tenant is 404 TENANT_UNKNOWN,
 * an unknown route 404 ROUTE_NOT_FOUND, an `until` not ahead or more than 30 days ahead 400
 * INVALID_REQUEST with its pointer. A tenant without brownouts may be paused (SPEC 13).
 */
export async function pauseBrownouts(runtime: GatewayRuntime, request: PauseRequest, nowMs: number): Promise<{ pause: BrownoutPause; scope: FleetScope }> {
  const route = checkPauseTarget(runtime, request.tenant, request.route ?? null)
  const untilMs = Date.parse(request.until)
  if (!(untilMs > nowMs) || untilMs - nowMs > MAX_PAUSE_MS) {
    throw new GatewayError('INVALID_REQUEST', 'until must be ahead, and at most 30 days ahead', { details: [{ pointer: '/until', message: 'ahead, at most 30 days' }] })
  }
  const pause: BrownoutPause = { tenant: request.tenant, route, until: new Date(untilMs).toISOString(), reason: request.reason, setAt: new Date(nowMs).toISOString() }
  return { pause, scope: await runtime.brownoutPauses.set(pause) }
}

/**
 * `DELETE /admin/brownouts/pause`: the pause removed, or null when there was none, and the change's
 * scope. As an override may (SPEC 13: pauses follow section 14's rules), a pause whose tenant or
 * route a reload removed may still be removed; with none in force, the tenant and route must be
 * the config's (404 for either unknown).
 */
export async function resumeBrownouts(runtime: GatewayRuntime, tenant: string, route: string | null, nowMs: number): Promise<{ pause: BrownoutPause | null; scope: FleetScope }> {
  const pauses = runtime.brownoutPauses
  // Chosen from the store's state, not a copy up to a refresh old.
  await pauses.current()
  if (pauses.inForce(tenant, route, nowMs) === undefined) checkPauseTarget(runtime, tenant, route)
  const { removed, scope } = await pauses.remove(tenant, route, nowMs)
  return { pause: removed ?? null, scope }
}

/**
 * SPEC 13 and 14: why a pause is not applied under the running config (its tenant or route is
 * gone), or null when it is. Listed with it until its `until`.
 */
export function pauseSuspendedReason(runtime: GatewayRuntime, pause: BrownoutPause): string | null {
  const missing = missingFromConfig(runtime, pause.tenant, pause.route)
  return missing === undefined ? null : `the ${missing} is not in the running config`
}

function checkPauseTarget(runtime: GatewayRuntime, tenant: string, route: string | null): string | null {
  const missing = missingFromConfig(runtime, tenant, route)
  if (missing === 'tenant') throw new GatewayError('TENANT_UNKNOWN', 'no such tenant is configured')
  if (missing === 'route') throw new GatewayError('ROUTE_NOT_FOUND', 'the tenant has no such legacy route ("METHOD /path" as in its route table)')
  return route
}

/** Which of a pause's tenant and route the running config lacks, if either. */
function missingFromConfig(runtime: GatewayRuntime, tenant: string, route: string | null): 'tenant' | 'route' | undefined {
  const tenantRuntime = runtime.tenancy.tenants.get(tenant)
  if (tenantRuntime === undefined) return 'tenant'
  if (route !== null && !tenantRuntime.routes.some((known) => known.label === route)) return 'route'
  return undefined
}
