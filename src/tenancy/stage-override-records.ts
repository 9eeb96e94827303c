import { TenantRouteRecords } from '../fleet/tenant-route-records.js'
import type { MigrationStage } from '../config/schema.js'
import type { StoreLogger } from '../store/redis-connection.js'
import { memorySharedStore, type SharedStore } from '../store/shared-store.js'
import type { StageOverride, StageOverrides } from './migration-policy.js'

/** SPEC 14's override as `PUT /admin/migration/stage` answers it and `/admin/migration` lists it. */
export interface StoredStageOverride extends StageOverride {
  readonly tenant: string
  readonly stage: MigrationStage
  readonly setAt: string
}

/**
 * SPEC 14's rollback lever: stage overrides of a tenant or one route, the fleet's with Redis
 * (fleet/fleet-records.ts: every replica within 2 s, kept across restarts, reloads and a store
 * that lost them; local while the store is down and written back later), this process's with
 * `store: memory`. The planner reads them from memory (`inForce`); whether the running config
 * allows one is the planner's question (migration-policy.ts `resolveEffectiveStage`), so an
 * override the config no longer allows is kept, suspended, rather than misapplied or lost.
 */
export class StageOverrideRecords extends TenantRouteRecords<StoredStageOverride> implements StageOverrides {
  constructor(store: SharedStore = memorySharedStore(), logger?: StoreLogger) {
    super(store, 'overrides', logger)
  }
}
