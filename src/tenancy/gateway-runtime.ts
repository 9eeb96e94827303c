import { hash, randomBytes } from 'node:crypto'
import type { GatewayConfig } from '../config/schema.js'
import { BrownoutPauses } from './brownout-pauses.js'
import { NO_STAGE_OVERRIDES, type StageOverrides } from './migration-policy.js'
import type { TenancyRuntime } from './resolve-tenant.js'
import { buildTenantRuntime } from './tenant-runtime.js'

/**
 * Everything a request needs from the config, resolved once and frozen. A reload builds a new
 * one and swaps it in whole, so a request sees one config from start to end.
 */
export interface GatewayRuntime {
  readonly config: GatewayConfig
  readonly tenancy: TenancyRuntime
  /** `internalAdmin.pathPrefixes`, lower-cased for comparison with normalised paths. */
  readonly blockedPrefixes: readonly string[]
  /** SPEC 13 pauses: the process's, handed from runtime to runtime so that a reload keeps them. */
  readonly brownoutPauses: BrownoutPauses
  /** SPEC 14's stage overrides: the process's, handed on like the pauses. */
  readonly stageOverrides: StageOverrides
  /**
   * SPEC 14's `Via` member of the fleet, `1.1 v4gw-<fleet id>`: on every upstream request, and a
   * request that arrives carrying it is a loop.
   */
  readonly via: string
  /** The `received-by` of `via` (`v4gw-<fleet id>`), which loop detection looks for. */
  readonly viaReceivedBy: string
  /**
   * The upstream pools' connect timeout: the start's `limits.connectTimeoutMs` (restart-only,
   * SPEC 8), which a reloaded file's value does not change until a restart.
   */
  readonly connectTimeoutMs: number
  /** What the process handed this runtime: a reload hands it on to the next. */
  readonly context: Readonly<RuntimeContext>
}

/** What a runtime gets from the process rather than from the config. */
export interface RuntimeContext {
  /** SPEC 13 pauses: the process's, so that a reload keeps them. */
  brownoutPauses?: BrownoutPauses
  /** SPEC 14.1: the origin of the embedded legacy backend, for tenants whose `upstream.legacy` is `embedded`. */
  embeddedLegacyOrigin?: string | undefined
  stageOverrides?: StageOverrides
  /** The fleet id with `store: memory` (SPEC 14: random per process); with Redis it comes from `store.redis.keyPrefix`. */
  processFleetId?: string
  /**
   * The fleet id of the store the process runs on, set by the first runtime: `store` is
   * restart-only (SPEC 12), so a reload that changes it must not change the `Via` member either.
   */
  fleetId?: string
  /** The start's `limits.connectTimeoutMs`, set by the first runtime (GatewayRuntime.connectTimeoutMs). */
  connectTimeoutMs?: number
}

/** This process's fleet id with `store: memory`, when the gateway is not handed one (a CLI's `explain`, unit tests). */
const PROCESS_FLEET_ID = randomFleetId()

/** SPEC 14: random per process with `store: memory`. 12 hex digits: two processes never meet on one by chance. */
export function randomFleetId(): string {
  return randomBytes(6).toString('hex')
}

/** SPEC 14: the replicas of one Redis key family are one fleet; the id says so without showing the prefix. */
export function fleetIdOf(config: GatewayConfig, processFleetId: string = PROCESS_FLEET_ID): string {
  return config.store.kind === 'redis' ? hash('sha256', `v4gw-fleet\0${config.store.redis.keyPrefix}`, 'hex').slice(0, 12) : processFleetId
}

export function buildGatewayRuntime(config: GatewayConfig, embeddedOrigin: string | undefined, brownoutPausesOrContext: BrownoutPauses | RuntimeContext = {}): GatewayRuntime {
  const context: RuntimeContext = brownoutPausesOrContext instanceof BrownoutPauses ? { brownoutPauses: brownoutPausesOrContext } : brownoutPausesOrContext
  const tenants = new Map(Object.entries(config.tenants).map(([name, tenant]) => [name, buildTenantRuntime(name, tenant, embeddedOrigin, context.embeddedLegacyOrigin)]))
  const fleetId = context.fleetId ?? fleetIdOf(config, context.processFleetId)
  const receivedBy = `v4gw-${fleetId}`
  const brownoutPauses = context.brownoutPauses ?? new BrownoutPauses()
  const stageOverrides = context.stageOverrides ?? NO_STAGE_OVERRIDES
  const connectTimeoutMs = context.connectTimeoutMs ?? config.limits.connectTimeoutMs
  return Object.freeze({
    config,
    tenancy: Object.freeze({
      header: config.tenancy.header,
      hosts: new Map(Object.entries(config.tenancy.hosts).map(([host, tenant]) => [host.toLowerCase(), tenant])),
      defaultTenant: config.tenancy.default,
      tenants
    }),
    blockedPrefixes: Object.freeze(config.internalAdmin.pathPrefixes.map((prefix) => prefix.toLowerCase())),
    brownoutPauses,
    stageOverrides,
    via: `1.1 ${receivedBy}`,
    viaReceivedBy: receivedBy,
    connectTimeoutMs,
    context: Object.freeze({ ...context, brownoutPauses, stageOverrides, fleetId, connectTimeoutMs })
  })
}
