import { FleetRecords, type FleetScope } from '../fleet/fleet-records.js'
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
 * `store: memory`. The planner reads them from memory (`activeFor`); whether the running config
 * allows one is the planner's question (migration-policy.ts `resolveEffectiveStage`), so an
 * override the config no longer allows is kept, suspended, rather than misapplied or lost.
 */
export class StageOverrideRecords implements StageOverrides {
  readonly #records: FleetRecords<StoredStageOverride>

  constructor(store: SharedStore = memorySharedStore(), logger?: StoreLogger) {
    this.#records = new FleetRecords<StoredStageOverride>({ store, family: 'overrides', logger: logger ?? SILENT })
  }

  start(): Promise<void> {
    return this.#records.start()
  }

  stop(): void {
    this.#records.stop()
  }

  scope(): FleetScope {
    return this.#records.scope()
  }

  /** SPEC 14's precedence between overrides: the route's, else the tenant's. */
  activeFor(tenant: string, route: string, nowMs: number): StoredStageOverride | undefined {
    if (this.#records.size === 0) return undefined
    return this.#records.get(overrideKey(tenant, route), nowMs) ?? this.#records.get(overrideKey(tenant, null), nowMs)
  }

  set(override: StoredStageOverride): Promise<FleetScope> {
    return this.#records.set(overrideKey(override.tenant, override.route), override)
  }

  remove(tenant: string, route: string | null, nowMs: number): Promise<{ removed: StoredStageOverride | undefined; scope: FleetScope }> {
    return this.#records.remove(overrideKey(tenant, route), nowMs)
  }

  /** Overrides in force at `nowMs` (expired ones are not listed: SPEC 14 removes them). */
  list(nowMs: number): StoredStageOverride[] {
    return this.#records.entries(nowMs).map(([, override]) => override)
  }
}

const SILENT: StoreLogger = { info: () => undefined, warn: () => undefined }

function overrideKey(tenant: string, route: string | null): string {
  return route === null ? `${tenant}\0` : `${tenant}\0${route}`
}
