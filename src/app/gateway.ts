import type { Server } from 'node:http'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { ReloadResult } from '../admin/admin-plugin.js'
import type { GatewayConfig } from '../config/schema.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import type { ClientRegistry } from '../fleet/client-registry.js'
import type { SessionStore } from '../sessions/session-store.js'
import type { ShadowResults } from '../fleet/shadow-results.js'
import type { SharedStore } from '../store/shared-store.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'

export interface GatewayOptions {
  config: GatewayConfig
  /** The file `reload()` re-reads (SIGHUP, `POST /admin/reload`). */
  configPath?: string
  /** Origin of the built-in simulator, for tenants whose upstream is `embedded`. */
  embeddedOrigin?: string
  /** Starts the simulator when a reloaded config needs one and none runs yet. */
  startEmbedded?: () => Promise<string>
  /** SPEC 14.1: origin of the embedded legacy backend, for tenants whose `upstream.legacy` is `embedded`. */
  embeddedLegacyOrigin?: string
  /** Starts the embedded legacy backend when a reloaded config needs one and none runs yet. */
  startEmbeddedLegacy?: () => Promise<string>
  logger?: Logger
  /** The lines `logger`'s destination dropped, its reader too far behind (logger.ts); the gateway's own logger's otherwise. */
  logLinesDropped?: () => number
  sessionStore?: SessionStore
}

export interface ListenAddresses {
  /** The first of `trafficUrls`. */
  trafficUrl: string
  /** The first of `adminUrls`: the address the config names. */
  adminUrl: string
  /** Every address each listener is bound to, a wildcard as itself (`http://0.0.0.0:8080`). */
  trafficUrls: string[]
  adminUrls: string[]
}

export interface Gateway {
  /** The traffic listener: node:http with the gateway's own handler (traffic-handler.ts). */
  readonly trafficServer: Server
  readonly admin: FastifyInstance
  readonly logger: Logger
  readonly sessionStore: SessionStore
  /** SPEC 12's shared store: memory, or the one Redis connection of this process. */
  readonly store: SharedStore
  readonly metrics: GatewayMetrics
  readonly migration: ClientRegistry
  /** SPEC 15's shadow results: counted in memory, the fleet's with Redis. */
  readonly shadow: ShadowResults
  runtime(): GatewayRuntime
  isReady(): boolean
  /** Re-reads `configPath`; an invalid file is logged and the running config stays (SPEC 8). */
  reload(): Promise<ReloadResult>
  /**
   * Swaps in a validated config for new requests at once; drops sessions of tenants whose upstream
   * changed, and resolves with how many went once a shared store has said, and with the
   * restart-only keys that differ from the running values (they wait for a restart).
   */
  applyConfig(config: GatewayConfig, embeddedOrigin?: string): Promise<{ sessionsDropped: number; restartRequired: string[] }>
  /** Readiness goes false and new requests get 503 SHUTTING_DOWN; in-flight ones go on. */
  startDraining(): void
  /** Listens on the config's addresses; `port: 0` overrides are for tests. */
  listen(overrides?: { trafficPort?: number; adminPort?: number; host?: string }): Promise<ListenAddresses>
  /** Stops accepting, waits for in-flight requests, then releases everything. */
  close(): Promise<void>
  /**
   * The end of the grace period: cuts the traffic connections still open and fails the upstream
   * calls still under way, a shared `sessions.start` included, so that `close` ends now.
   */
  cutRemaining(): void
}
