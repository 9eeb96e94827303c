/**
 * How much legacy traffic is left, per tenant and legacy route (SPEC 9): what tells a team
 * when the gateway can go. Memory is bounded: at most `maxClientsPerRoute` distinct clients
 * are kept per route, and clients seen after that are counted as dropped, not stored.
 * Tenants and routes come from the config, so they are bounded by it.
 */
export interface MigrationReport {
  /** `atMs`: epoch milliseconds (a number, not a Date per request). */
  record(sample: { tenant: string; route: string; clientFingerprint: string | undefined; userAgent: string | undefined; atMs: number }): void
  snapshot(): MigrationSnapshot
  /** Drops the tenants and routes the config no longer has. */
  retain(isKnown: (tenant: string, route: string) => boolean): void
}

export interface MigrationSnapshot {
  generatedAt: string
  maxClientsPerRoute: number
  tenants: Record<string, { routes: Record<string, RouteReport> }>
}

export interface RouteReport {
  requests: number
  lastSeen: string
  distinctClients: number
  /** Distinct clients seen after the cap was reached; a lower bound. */
  clientsNotTracked: number
  clients: { credentialFingerprint: string; userAgent: string; requests: number; lastSeen: string }[]
}

interface RouteState {
  requests: number
  lastSeenMs: number
  clients: Map<string, { credentialFingerprint: string; userAgent: string; requests: number; lastSeenMs: number }>
  clientsNotTracked: number
  untracked: Set<string>
}

const MAX_USER_AGENT_CHARS = 256
const MAX_UNTRACKED_KEYS = 10_000

export function createMigrationReport(options: { maxClientsPerRoute: number }): MigrationReport {
  const tenants = new Map<string, Map<string, RouteState>>()

  function routeState(tenant: string, route: string): RouteState {
    let routes = tenants.get(tenant)
    if (routes === undefined) tenants.set(tenant, (routes = new Map()))
    let state = routes.get(route)
    if (state === undefined) routes.set(route, (state = { requests: 0, lastSeenMs: 0, clients: new Map(), clientsNotTracked: 0, untracked: new Set() }))
    return state
  }

  return {
    record({ tenant, route, clientFingerprint, userAgent, atMs }) {
      const state = routeState(tenant, route)
      state.requests++
      state.lastSeenMs = atMs
      const credentialFingerprint = clientFingerprint === undefined ? 'none' : clientFingerprint.slice(0, 16)
      const agent = (userAgent ?? '').slice(0, MAX_USER_AGENT_CHARS)
      const key = `${credentialFingerprint} ${agent}`
      const client = state.clients.get(key)
      if (client !== undefined) {
        client.requests++
        client.lastSeenMs = atMs
      } else if (state.clients.size < options.maxClientsPerRoute) {
        state.clients.set(key, { credentialFingerprint, userAgent: agent, requests: 1, lastSeenMs: atMs })
      } else if (!state.untracked.has(key)) {
        state.clientsNotTracked++
        // Remembering untracked keys keeps the count of distinct ones honest, up to a bound.
        if (state.untracked.size < MAX_UNTRACKED_KEYS) state.untracked.add(key)
      }
    },
    snapshot() {
      const snapshot: MigrationSnapshot = { generatedAt: new Date().toISOString(), maxClientsPerRoute: options.maxClientsPerRoute, tenants: {} }
      for (const [tenant, routes] of tenants) {
        const reportRoutes: Record<string, RouteReport> = {}
        for (const [route, state] of routes) {
          reportRoutes[route] = {
            requests: state.requests,
            lastSeen: new Date(state.lastSeenMs).toISOString(),
            distinctClients: state.clients.size + state.clientsNotTracked,
            clientsNotTracked: state.clientsNotTracked,
            clients: [...state.clients.values()]
              .sort((a, b) => b.requests - a.requests)
              .map(({ lastSeenMs, ...client }) => ({ ...client, lastSeen: new Date(lastSeenMs).toISOString() }))
          }
        }
        snapshot.tenants[tenant] = { routes: reportRoutes }
      }
      return snapshot
    },
    retain(isKnown) {
      for (const [tenant, routes] of tenants) {
        for (const route of routes.keys()) if (!isKnown(tenant, route)) routes.delete(route)
        if (routes.size === 0) tenants.delete(tenant)
      }
    }
  }
}
