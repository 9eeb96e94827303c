import { effectiveDeprecation, nextBrownoutWindows, type DeprecationConfig } from '../config/deprecation.js'
import type { TenantConfig } from '../config/schema.js'
import { GatewayError } from '../errors/registry.js'
import { DAY_MS } from '../fleet/registry-data.js'
import { EMPTY_ROUTE, type ClientView, type RegistryView } from '../fleet/registry-view.js'
import type { BrownoutPause } from '../tenancy/brownout-pauses.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import { pauseSuspendedReason } from '../tenancy/pause-brownouts.js'
import { suspendedReason } from '../tenancy/set-stage-override.js'
import type { StageOverrideRecords } from '../tenancy/stage-override-records.js'
import { routeStageView, tenantStageView } from '../tenancy/stage-view.js'

/** SPEC 12: `?clients=` defaults to 100 and goes up to 10,000. */
export const DEFAULT_CLIENTS_LISTED = 100
export const MAX_CLIENTS_LISTED = 10_000
/** How many of a deprecation's next windows the answer lists (as many as `check-config` prints). */
const NEXT_BROWNOUTS = 5

/**
 * The tenants an answer covers and their configured legacy routes: every tenant, or the one
 * `?tenant=` names (an unknown one is 404 TENANT_UNKNOWN, never echoing the name).
 */
export function migrationRoutes(runtime: GatewayRuntime, only: string | undefined): Map<string, string[]> {
  const routes = new Map<string, string[]>()
  for (const [name, tenant] of runtime.tenancy.tenants) {
    if (only !== undefined && name !== only) continue
    routes.set(
      name,
      tenant.routes.map((route) => route.label)
    )
  }
  if (only !== undefined && routes.size === 0) throw new GatewayError('TENANT_UNKNOWN', 'no tenant of that name is configured')
  return routes
}

/** `?clients=N`: a whole number from 0 to 10,000; absent, 100. */
export function parseClientsListed(raw: string | string[] | undefined): number {
  if (raw === undefined || raw === '') return DEFAULT_CLIENTS_LISTED
  const value = Array.isArray(raw) ? undefined : raw
  const count = value !== undefined && /^\d{1,6}$/.test(value) ? Number(value) : Number.NaN
  if (!(count >= 0 && count <= MAX_CLIENTS_LISTED)) {
    throw new GatewayError('INVALID_REQUEST', `clients takes a whole number from 0 to ${MAX_CLIENTS_LISTED}`, { details: [{ pointer: 'query:clients', message: `0-${MAX_CLIENTS_LISTED}, once` }] })
  }
  return count
}

const iso = (ms: number): string => new Date(ms).toISOString()
const isoOrNull = (ms: number | null): string | null => (ms === null ? null : iso(ms))

/** SPEC 12's `GET /admin/migration` answer (`schemaVersion: 2`) from what the registry knows and the running config. */
export function buildMigrationAnswer(
  runtime: GatewayRuntime,
  overrides: StageOverrideRecords,
  view: RegistryView,
  asked: { routesOf: ReadonlyMap<string, readonly string[]>; only: string | undefined },
  nowMs: number
): Record<string, unknown> {
  const routesOf = asked.routesOf
  const pauses = runtime.brownoutPauses.list(nowMs)
  const tenants: Record<string, unknown> = {}
  for (const [name, labels] of routesOf) {
    const config = runtime.config.tenants[name] as TenantConfig
    const known = view.tenants.get(name)
    const stages = tenantStageView(runtime, overrides, name, nowMs)
    const routes: Record<string, unknown> = {}
    for (const label of labels) {
      const route = known?.routes.get(label) ?? EMPTY_ROUTE
      const deprecation = routeDeprecation(config, label)
      routes[label] = {
        ...routeStageView(runtime, name, label, nowMs),
        requests: route.requests,
        lastSeen: isoOrNull(route.lastSeenMs),
        lastSeenNonExempt: isoOrNull(route.lastSeenNonExemptMs),
        distinctClients: route.distinctClients,
        clientsListed: route.clients.length,
        clientsEvicted: route.clientsEvicted,
        days: route.days,
        deprecation: deprecation === null ? null : { date: iso(Date.parse(deprecation.date)), sunset: deprecation.sunset === undefined ? null : iso(Date.parse(deprecation.sunset)), afterSunset: deprecation.afterSunset, nextBrownouts: nextBrownoutWindows(deprecation, nowMs, NEXT_BROWNOUTS) },
        brownoutPause: pauseShown(pauses.find((pause) => pause.tenant === name && pause.route === label)),
        clients: route.clients.map((client) => clientShown(config, deprecation, client, nowMs))
      }
    }
    tenants[name] = {
      // SPEC 12: since when the answer's data is complete. The tenant's counts live
      // `retentionDays` (keys expire, memory sweeps): what is older is gone, so a client quiet for
      // longer must not read as never seen since an earlier first write (sunset-check reads it).
      since: iso(Math.max(view.sinceMs, view.generatedAtMs - config.clients.retentionDays * DAY_MS)),
      stage: stages.stage,
      legacyShare: known?.share ?? [],
      overrides: stages.overrides,
      brownoutPause: pauseShown(pauses.find((pause) => pause.tenant === name && pause.route === null)),
      routes
    }
  }
  return { schemaVersion: 2, generatedAt: iso(view.generatedAtMs), scope: view.scope, configHashes: view.configHashes, tenants, suspended: suspendedElsewhere(runtime, overrides, pauses, asked.only, nowMs) }
}

/**
 * SPEC 14: an override or pause whose tenant or route a reload removed is not applied, and is
 * listed with `suspended` until its `until`. A tenant's overrides (its removed routes' included)
 * are listed with the tenant; what has no configured tenant or route to be listed under is listed
 * here: overrides of removed tenants, pauses of removed tenants and routes. With `?tenant=`, only
 * that tenant's.
 */
function suspendedElsewhere(runtime: GatewayRuntime, overrides: StageOverrideRecords, pauses: readonly BrownoutPause[], only: string | undefined, nowMs: number): Record<string, unknown> {
  const asked = (tenant: string): boolean => only === undefined || tenant === only
  return {
    overrides: overrides
      .list(nowMs)
      .filter((override) => !runtime.tenancy.tenants.has(override.tenant) && asked(override.tenant))
      .map((override) => ({ ...override, suspended: suspendedReason(runtime, override) })),
    brownoutPauses: pauses
      .map((pause) => ({ ...(pauseShown(pause) as BrownoutPause), suspended: pauseSuspendedReason(runtime, pause) }))
      .filter((pause) => pause.suspended !== null && asked(pause.tenant))
  }
}

function routeDeprecation(tenant: TenantConfig, label: string): DeprecationConfig | null {
  return effectiveDeprecation(tenant.legacy.deprecation, tenant.migration.routes[label]?.deprecation) ?? null
}

function pauseShown(pause: BrownoutPause | undefined): BrownoutPause | null {
  return pause === undefined ? null : { tenant: pause.tenant, route: pause.route, until: pause.until, reason: pause.reason, setAt: pause.setAt }
}

function clientShown(tenant: TenantConfig, deprecation: DeprecationConfig | null, client: ClientView, nowMs: number): Record<string, unknown> {
  const label = tenant.clients.labels[client.clientId]
  const exemption = deprecation?.exempt.find((entry) => entry.client === client.clientId && Date.parse(entry.until) > nowMs)
  return {
    clientId: client.clientId,
    label: label === undefined ? null : typeof label === 'string' ? label : label.name,
    owner: label === undefined || typeof label === 'string' ? null : label.owner,
    userAgent: client.userAgent,
    requests: client.requests,
    firstSeen: iso(client.firstSeenMs),
    lastSeen: iso(client.lastSeenMs),
    lastBrownout: isoOrNull(client.lastBrownoutMs),
    exemptUntil: exemption === undefined ? null : iso(Date.parse(exemption.until))
  }
}

