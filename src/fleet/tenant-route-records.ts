import type { StoreLogger } from '../store/redis-connection.js'
import type { SharedStore } from '../store/shared-store.js'
import { FleetRecords, type FleetScope } from './fleet-records.js'

/** A record of a tenant, or of one of its legacy routes (SPEC 13's pauses, SPEC 14's overrides). */
export interface TenantRouteRecord {
  readonly tenant: string
  /** `METHOD /path` of the route, or null for the whole tenant. */
  readonly route: string | null
  readonly until: string
}

/**
 * Records set per tenant or per route, the fleet's with Redis (fleet-records.ts), read on the
 * request path from memory with SPEC 13/14's precedence: the route's own, else the tenant's.
 */
export class TenantRouteRecords<T extends TenantRouteRecord> {
  readonly #records: FleetRecords<T>

  constructor(store: SharedStore, family: string, logger: StoreLogger = SILENT) {
    this.#records = new FleetRecords<T>({ store, family, logger })
  }

  /** Loads the fleet's records and keeps them fresh (with Redis; nothing to do in memory); true when they were read. */
  start(): Promise<boolean> {
    return this.#records.start()
  }

  stop(): void {
    this.#records.stop()
  }

  /** The scope a change made now would have (SPEC 12). */
  scope(): FleetScope {
    return this.#records.scope()
  }

  set(record: T): Promise<FleetScope> {
    return this.#records.set(keyOf(record.tenant, record.route), record)
  }

  /** The record removed (undefined when none was in force), and the change's scope. */
  remove(tenant: string, route: string | null, nowMs: number): Promise<{ removed: T | undefined; scope: FleetScope }> {
    return this.#records.remove(keyOf(tenant, route), nowMs)
  }

  /** The record in force at `nowMs` for exactly one scope: a route's own, or the tenant's (`route` null). */
  inForce(tenant: string, route: string | null, nowMs: number): T | undefined {
    if (this.#records.size === 0) return undefined
    return this.#records.get(keyOf(tenant, route), nowMs)
  }

  /** The record in force for a route at `nowMs`: the route's own, else the tenant's. */
  activeFor(tenant: string, route: string, nowMs: number): T | undefined {
    if (this.#records.size === 0) return undefined
    return this.#records.get(keyOf(tenant, route), nowMs) ?? this.#records.get(keyOf(tenant, null), nowMs)
  }

  /** Brings the local copy up to the store's state as of now (a removal decides on it). */
  current(): Promise<void> {
    return this.#records.current()
  }

  /** Records in force at `nowMs` (ended ones are not listed: SPEC 14's expiry). */
  list(nowMs: number): T[] {
    return this.#records.entries(nowMs).map(([, record]) => record)
  }
}

const SILENT: StoreLogger = { info: () => undefined, warn: () => undefined }

function keyOf(tenant: string, route: string | null): string {
  return route === null ? `${tenant}\0` : `${tenant}\0${route}`
}
