import { TenantRouteRecords } from '../fleet/tenant-route-records.js'
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

export class BrownoutPauses extends TenantRouteRecords<BrownoutPause> {
  constructor(store: SharedStore = memorySharedStore(), logger?: StoreLogger) {
    super(store, 'pauses', logger)
  }
}
