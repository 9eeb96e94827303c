import type { IncomingMessage, Server } from 'node:http'
import type { Duplex } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { adminPlugin, type ReloadResult } from './admin/admin-plugin.js'
import { ConfigError, loadConfig } from './config/load-config.js'
import type { GatewayConfig } from './config/schema.js'
import { buildGatewayRuntime, type GatewayRuntime } from './gateway-runtime.js'
import { createLogger } from './observability/logger.js'
import { createMetrics, type GatewayMetrics } from './observability/metrics.js'
import { createMigrationReport, type MigrationReport } from './observability/migration-report.js'
import { resolveRequestId } from './observability/request-id.js'
import { createSessionMap } from './sessions/session-map.js'
import { createSessionStore } from './sessions/create-session-store.js'
import type { SessionStore } from './sessions/session-store.js'
import { usesEmbeddedUpstream } from './tenancy/tenant-runtime.js'
import { explainRequest } from './traffic/explain-request.js'
import type { TrafficContext } from './traffic/traffic-context.js'
import { createTrafficHandler } from './traffic/traffic-handler.js'
import { closeServer, createTrafficServer, listen } from './traffic/traffic-server.js'
import { answerClientError, answerConnect } from './traffic/client-error.js'
import { sendGatewayError } from './errors/error-handler.js'
import { createUpstreamClient, type UpstreamResponse } from './upstream/upstream-client.js'

export interface GatewayOptions {
  config: GatewayConfig
  /** The file `reload()` re-reads (SIGHUP, `POST /admin/reload`). */
  configPath?: string
  /** Origin of the built-in simulator, for tenants whose upstream is `embedded`. */
  embeddedOrigin?: string
  /** Starts the simulator when a reloaded config needs one and none runs yet. */
  startEmbedded?: () => Promise<string>
  logger?: Logger
  sessionStore?: SessionStore
}

export interface ListenAddresses {
  trafficUrl: string
  adminUrl: string
}

export interface Gateway {
  /** The traffic listener: node:http with the gateway's own handler (traffic-handler.ts). */
  readonly trafficServer: Server
  readonly admin: FastifyInstance
  readonly logger: Logger
  readonly sessionStore: SessionStore
  readonly metrics: GatewayMetrics
  readonly migration: MigrationReport
  runtime(): GatewayRuntime
  isReady(): boolean
  /** Re-reads `configPath`; an invalid file is logged and the running config stays (SPEC 8). */
  reload(): Promise<ReloadResult>
  /**
   * Swaps in a validated config for new requests at once; drops sessions of tenants whose upstream
   * changed, and resolves with how many went once a shared store has said.
   */
  applyConfig(config: GatewayConfig, embeddedOrigin?: string): Promise<{ sessionsDropped: number }>
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

/** How long `close` waits at most for the last responses to report their end. */
const SETTLE_GUARD_MS = 1_000

/** Keys that need a restart: they shape listeners and pools built once. */
const RESTART_ONLY_KEYS = ['listen', 'admin.host', 'admin.port', 'limits.connectTimeoutMs', 'limits.maxEventLoopDelayMs', 'sessions.maxEntries', 'sessions.ttlMs', 'sessions.store', 'sessions.redis'] as const

function readKey(config: GatewayConfig, key: string): unknown {
  return key.split('.').reduce<unknown>((value, part) => (value as Record<string, unknown>)[part], config)
}

/** The composition root: builds both listeners without opening a socket. */
export async function buildGateway(options: GatewayOptions): Promise<Gateway> {
  const logger = options.logger ?? createLogger({ level: options.config.log.level })
  let runtime = buildGatewayRuntime(options.config, options.embeddedOrigin)
  let embeddedOrigin = options.embeddedOrigin
  let listening = false
  let draining = false
  let closing: Promise<void> | undefined
  // Settles when the grace period ends and the pool is destroyed: close() waits for the pool's
  // calls only until then (undici's close() may already be waiting when the cut comes).
  let cut = false
  let announceCut: () => void = () => undefined
  const cutCome = new Promise<void>((resolve) => {
    announceCut = resolve
  })
  const initial = options.config
  // A store given by the caller stays the caller's to close.
  const ownsSessionStore = options.sessionStore === undefined
  // The metrics are made after the store (they read its size); evictions come only with traffic.
  const sessionStore = options.sessionStore ?? (await createSessionStore(initial, logger, { onCapacityEvict: () => metrics.observeSessionEvent('capacity-evicted') }))
  const upstream = createUpstreamClient({ connectTimeoutMs: initial.limits.connectTimeoutMs })
  const metrics = createMetrics({ sessionEntries: () => sessionStore.size, sessionStoreStatus: () => sessionStore.describe() })
  const migration = createMigrationReport({ maxClientsPerRoute: 1_000 })
  const sessions = createSessionMap<UpstreamResponse>(sessionStore, { onEvict: () => metrics.observeSessionEvent('evicted') })

  function onRequestDone(traffic: TrafficContext, statusCode: number, userAgent: string | undefined): void {
    metrics.observeRequest({
      tenant: traffic.tenant,
      trafficClass: traffic.trafficClass,
      route: traffic.legacyRoute,
      statusCode,
      durationMs: performance.now() - traffic.startedAt,
      upstreamMs: traffic.upstreamMs,
      errorCode: traffic.errorCode
    })
    if (traffic.sessionOutcome !== undefined) metrics.observeSessionEvent(traffic.sessionOutcome)
    if (traffic.legacyRoute !== undefined && traffic.tenant !== undefined) {
      migration.record({ tenant: traffic.tenant, route: traffic.legacyRoute, clientFingerprint: traffic.clientFingerprint, userAgent, atMs: Date.now() })
    }
  }

  const trafficHandler = createTrafficHandler({ getRuntime: () => runtime, upstream, sessions, logger, isDraining: () => draining, onRequestDone })
  const trafficServer = createTrafficServer(trafficHandler, logger, (refusal) =>
    metrics.observeRequest({ tenant: undefined, trafficClass: undefined, route: undefined, statusCode: refusal.statusCode, durationMs: 0, upstreamMs: undefined, errorCode: refusal.code })
  )

  async function applyConfig(config: GatewayConfig, origin = embeddedOrigin): Promise<{ sessionsDropped: number; restartRequired: string[] }> {
    const next = buildGatewayRuntime(config, origin)
    const previous = runtime
    runtime = next
    embeddedOrigin = origin
    logger.level = config.log.level
    // Against the values in effect, the start's: a key changed by an earlier reload is still
    // pending, and one set back to its running value no longer is.
    const restartRequired = RESTART_ONLY_KEYS.filter((key) => JSON.stringify(readKey(initial, key)) !== JSON.stringify(readKey(config, key)))
    if (restartRequired.length > 0) logger.warn({ keys: restartRequired }, 'these keys differ from the running values and take effect only after a restart')
    const drops: (number | Promise<number>)[] = []
    for (const [name, tenant] of previous.tenancy.tenants) {
      if (next.tenancy.tenants.get(name)?.upstreamOrigin !== tenant.upstreamOrigin) drops.push(sessionStore.clear(name))
    }
    migration.retain((tenant, route) => next.tenancy.tenants.get(tenant)?.routes.some((r) => `${r.method} ${r.path}` === route) === true)
    // Everything above applies before this first wait. A shared store answers later, and its
    // clear falls back to this replica's own entries when Redis fails (logged there).
    let sessionsDropped = 0
    for (const drop of await Promise.allSettled(drops)) {
      if (drop.status === 'fulfilled') sessionsDropped += drop.value
      else logger.warn({ err: drop.reason }, 'dropping the session-map entries of a moved tenant failed; the count leaves them out')
    }
    return { sessionsDropped, restartRequired }
  }

  async function reload(): Promise<ReloadResult> {
    if (options.configPath === undefined) return { ok: false, problems: ['this gateway was not started from a config file'] }
    try {
      const config = await loadConfig(options.configPath)
      let origin = embeddedOrigin
      if (origin === undefined && usesEmbeddedUpstream(config)) {
        if (options.startEmbedded === undefined) throw new ConfigError(options.configPath, ['a tenant uses the embedded simulator, which this gateway cannot start'])
        origin = await options.startEmbedded()
      }
      const { sessionsDropped, restartRequired } = await applyConfig(config, origin)
      metrics.observeReload('success')
      const tenants = Object.keys(config.tenants)
      logger.info({ config: options.configPath, tenants, sessionsDropped, restartRequired }, 'config reloaded')
      return { ok: true, tenants, sessionsDropped, restartRequired }
    } catch (error) {
      metrics.observeReload('failure')
      const problems = error instanceof ConfigError ? error.problems : [String((error as Error).message)]
      logger.error({ config: options.configPath, problems }, 'config reload rejected; the running config stays')
      return { ok: false, problems }
    }
  }

  const adminLog = logger.child({ listener: 'admin' })
  const admin = Fastify({
    loggerInstance: adminLog as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // SPEC 6's request id on the admin listener's errors too: a valid incoming one, else a UUID.
    genReqId: (request) => resolveRequestId(request.headers['x-request-id']),
    // The envelope for what fastify and Node refuse before a route runs too (an undecodable URL,
    // malformed HTTP), as on the traffic listener.
    frameworkErrors: (error, request, reply) => sendGatewayError(error, request, reply),
    clientErrorHandler: (error, socket) => answerClientError(adminLog, error, socket)
  })
  admin.server.on('connect', (_request: IncomingMessage, socket: Duplex) => answerConnect(adminLog, socket))
  await admin.register(adminPlugin, {
    isReady: () => listening && !draining,
    adminToken: () => runtime.config.admin.token,
    metrics,
    sessionStore,
    migration,
    reload,
    explain: (input) => explainRequest(runtime, input)
  })

  return {
    trafficServer,
    admin,
    logger,
    sessionStore,
    metrics,
    migration,
    runtime: () => runtime,
    isReady: () => listening && !draining,
    reload,
    applyConfig,
    startDraining() {
      draining = true
    },
    async listen(overrides = {}) {
      const config = runtime.config
      const trafficUrl = await listen(trafficServer, overrides.host ?? config.listen.host, overrides.trafficPort ?? config.listen.port)
      const adminUrl = await admin.listen({ host: overrides.host ?? config.admin.host, port: overrides.adminPort ?? config.admin.port })
      listening = true
      return { trafficUrl, adminUrl }
    },
    cutRemaining() {
      trafficServer.closeAllConnections()
      // An admin request still arriving (half its headers or body) is not idle, so fastify's
      // close would wait on it for as long as the client likes.
      admin.server.closeAllConnections()
      if (cut) return
      cut = true
      // The admin listener accepts until fastify's close reaches server.close(): the grace is
      // spent, so a connection that comes in between is cut too.
      admin.server.on('connection', (socket: Duplex) => socket.destroy())
      void upstream.destroy().then(announceCut, announceCut)
    },
    close() {
      // Once: a signal and a caller may both ask, and the second must wait for the same end.
      closing ??= (async () => {
        draining = true
        await closeServer(trafficServer, runtime.config.shutdown.idleCloseMs)
        // Every connection has ended or been cut, so every response closes within a turn or two;
        // the bound is only a guard against one that somehow never does.
        await Promise.race([trafficHandler.settled(), sleep(SETTLE_GUARD_MS, undefined, { ref: false })])
        trafficHandler.stop()
        listening = false
        await admin.close()
        await Promise.race([upstream.close().catch(() => undefined), cutCome])
        if (ownsSessionStore) await sessionStore.close?.()
      })()
      return closing
    }
  }
}
