import { FleetRecords, type FleetScope } from '../fleet/fleet-records.js'
import type { StoreLogger } from '../store/redis-connection.js'
import { memorySharedStore, type SharedStore } from '../store/shared-store.js'

/**
 * SPEC 13's emergency lever: a pause stops every brownout and every `afterSunset: gone` answer of
 * a tenant, or of one route, until its `until`. Pauses belong to the process, not to a config:
 * each runtime a reload builds is handed the same set, so a reload keeps them. With Redis they
 * are the fleet's (fleet/fleet-records.ts: every replica within a second or two, kept across
 * restarts and a store that lost them, local while the store is down).
 */
export interface BrownoutPause {
  readonly tenant: string
  /** `METHOD /path` of the route, or null for the whole tenant. */
  readonly route: string | null
  readonly until: string
  readonly reason: string
  readonly setAt: string
}

/** SPEC 13: a pause ends at most this far ahead. */
export const MAX_PAUSE_MS = 30 * 24 * 3_600_000

export class BrownoutPauses {
  readonly #records: FleetRecords<BrownoutPause>

  constructor(store: SharedStore = memorySharedStore(), logger?: StoreLogger) {
    this.#records = new FleetRecords<BrownoutPause>({ store, family: 'pauses', logger: logger ?? SILENT })
  }

  /** Loads the fleet's pauses and keeps them fresh (with Redis; nothing to do in memory). */
  start(): Promise<void> {
    return this.#records.start()
  }

  stop(): void {
    this.#records.stop()
  }

  /** The scope a change made now would have (SPEC 12). */
  scope(): FleetScope {
    return this.#records.scope()
  }

  set(pause: BrownoutPause): Promise<FleetScope> {
    return this.#records.set(pauseKey(pause.tenant, pause.route), pause)
  }

  /** The pause removed (undefined when none was in force), and the change's scope. */
  async remove(tenant: string, route: string | null, nowMs: number): Promise<{ removed: BrownoutPause | undefined; scope: FleetScope }> {
    return this.#records.remove(pauseKey(tenant, route), nowMs)
  }

  /** The pause in force for a route at `nowMs`: the route's own, else the tenant's. */
  activeFor(tenant: string, route: string, nowMs: number): BrownoutPause | undefined {
    if (this.#records.size === 0) return undefined
    return this.#records.get(pauseKey(tenant, route), nowMs) ?? this.#records.get(pauseKey(tenant, null), nowMs)
  }

  /** Pauses in force at `nowMs` (SPEC 14's expiry: ended ones are not listed). */
  list(nowMs: number): BrownoutPause[] {
    return this.#records.entries(nowMs).map(([, pause]) => pause)
  }
}

const SILENT: StoreLogger = { info: () => undefined, warn: () => undefined }

function pauseKey(tenant: string, route: string | null): string {
  return route === null ? `${tenant}\0` : `${tenant}\0${route}`
}
