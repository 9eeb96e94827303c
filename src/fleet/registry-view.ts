import type { FleetScope } from './fleet-records.js'
import { dayName, dayOf, DAYS_KEPT, type RegistryData } from './registry-data.js'

/** A client of one route as an answer lists it (SPEC 12); instants in epoch ms, null for never. */
export interface ClientView {
  clientId: string
  userAgent: string | null
  requests: number
  firstSeenMs: number
  lastSeenMs: number
  lastBrownoutMs: number | null
}

export interface RouteView {
  requests: number
  lastSeenMs: number | null
  lastSeenNonExemptMs: number | null
  distinctClients: number
  clientsEvicted: number
  /** The UTC days of the last 30 with traffic, oldest first. */
  days: { day: string; requests: number; clients: number }[]
  /** Most recently seen first, at most the number asked for. */
  clients: ClientView[]
}

export interface TenantView {
  /** The UTC days of the last 30 with traffic, oldest first. */
  share: { day: string; legacy: number; native: number }[]
  routes: Map<string, RouteView>
}

/** What the registry knows, for one answer: its scope and since when it is complete (SPEC 12). */
export interface RegistryView {
  scope: FleetScope
  sinceMs: number
  generatedAtMs: number
  /** The config hashes (SPEC 17) of the replicas whose counts are in the answer. */
  configHashes: string[]
  tenants: Map<string, TenantView>
}

/**
 * SPEC 12's `distinctClients`, which counts client ids: the route's HyperLogLog estimate, held
 * to what is certain. Every client listed is one id, and every id the route stopped listing left
 * one record, so the count lies between the clients held and those plus every eviction and
 * retention sweep. A route that never let a client go (most) reads its exact count, never 101
 * next to 100 listed.
 */
export function distinctClientCount(estimate: number, held: number, departed: number): number {
  return Math.min(Math.max(estimate, held), held + departed)
}

export const EMPTY_ROUTE: RouteView = Object.freeze({ requests: 0, lastSeenMs: null, lastSeenNonExemptMs: null, distinctClients: 0, clientsEvicted: 0, days: [], clients: [] })

/** The oldest UTC day an answer lists at `nowMs`. */
export function firstListedDay(nowMs: number): number {
  return dayOf(nowMs) - DAYS_KEPT + 1
}

/** A view of counts held in memory (the whole registry with `store: memory`, this replica's delta while the store is away). */
export function viewOfData(data: RegistryData, tenants: readonly string[], clientsPerRoute: number, nowMs: number): Map<string, TenantView> {
  const firstDay = firstListedDay(nowMs)
  const views = new Map<string, TenantView>()
  for (const name of tenants) {
    const tenant = data.tenants.get(name)
    if (tenant === undefined) continue
    const share = [...tenant.share]
      .filter(([day]) => day >= firstDay)
      .sort(([a], [b]) => a - b)
      .map(([day, counts]) => ({ day: dayName(day), legacy: counts.legacy, native: counts.native }))
    const routes = new Map<string, RouteView>()
    for (const [label, route] of tenant.routes) {
      const clients: ClientView[] = []
      // Most recently seen first (SPEC 12). The Map is in the order requests were recorded, as
      // they finished: one that took long was seen before those it finished after. Reversed
      // first, so that a tie keeps the later-recorded client first.
      const records = [...route.clients.values()].reverse().sort((a, b) => b.lastSeenMs - a.lastSeenMs)
      for (let index = 0; index < records.length && clients.length < clientsPerRoute; index++) {
        const client = records[index]!
        clients.push({ clientId: client.id, userAgent: client.userAgent, requests: client.requests, firstSeenMs: client.firstSeenMs, lastSeenMs: client.lastSeenMs, lastBrownoutMs: client.lastBrownoutMs === 0 ? null : client.lastBrownoutMs })
      }
      routes.set(label, {
        requests: route.requests,
        lastSeenMs: route.lastSeenMs === 0 ? null : route.lastSeenMs,
        lastSeenNonExemptMs: route.lastSeenNonExemptMs === 0 ? null : route.lastSeenNonExemptMs,
        distinctClients: distinctClientCount(route.distinct.count(), route.clients.size, route.clientsEvicted + route.clientsSwept),
        clientsEvicted: route.clientsEvicted,
        days: [...route.days]
          .filter(([day]) => day >= firstDay)
          .sort(([a], [b]) => a - b)
          .map(([day, count]) => ({ day: dayName(day), requests: count.requests, clients: count.clients.count() })),
        clients
      })
    }
    views.set(name, { share, routes })
  }
  return views
}
