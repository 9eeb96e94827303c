import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import { adminPlugin } from './admin/admin-plugin.js'
import type { GatewayConfig } from './config/schema.js'
import { buildGatewayRuntime, type GatewayRuntime } from './gateway-runtime.js'
import { createLogger } from './observability/logger.js'
import { resolveRequestId } from './observability/request-id.js'
import { createSessionMap } from './sessions/session-map.js'
import { createMemorySessionStore, type SessionStore } from './sessions/session-store.js'
import { trafficPlugin } from './traffic/traffic-plugin.js'
import { createUpstreamClient, type UpstreamClient, type UpstreamResponse } from './upstream/upstream-client.js'

export interface GatewayOptions {
  config: GatewayConfig
  /** Origin of the built-in simulator, for tenants whose upstream is `embedded`. */
  embeddedOrigin?: string
  logger?: Logger
  sessionStore?: SessionStore
}

export interface ListenAddresses {
  trafficUrl: string
  adminUrl: string
}

export interface Gateway {
  readonly traffic: FastifyInstance
  readonly admin: FastifyInstance
  readonly logger: Logger
  readonly sessionStore: SessionStore
  runtime(): GatewayRuntime
  isReady(): boolean
  /** Listens on the config's addresses; `port: 0` overrides are for tests. */
  listen(overrides?: { trafficPort?: number; adminPort?: number; host?: string }): Promise<ListenAddresses>
  close(): Promise<void>
}

/** The composition root: builds both listeners without opening a socket. */
export async function buildGateway(options: GatewayOptions): Promise<Gateway> {
  const { config } = options
  const logger = options.logger ?? createLogger({ level: config.log.level })
  const runtime = buildGatewayRuntime(config, options.embeddedOrigin)
  const sessionStore = options.sessionStore ?? createMemorySessionStore({ maxEntries: config.sessions.maxEntries, ttlMs: config.sessions.ttlMs })
  const upstream: UpstreamClient = createUpstreamClient({ connectTimeoutMs: config.limits.connectTimeoutMs, upstreamTimeoutMs: config.limits.upstreamTimeoutMs })
  let listening = false

  const traffic = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    // One access-log line per request is written by the traffic plugin (SPEC 9).
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'requestId' }),
    genReqId: (request) => resolveRequestId(request.headers['x-request-id'])
  })
  await traffic.register(trafficPlugin, { getRuntime: () => runtime, upstream, sessions: createSessionMap<UpstreamResponse>(sessionStore) })

  const admin = Fastify({ loggerInstance: logger.child({ listener: 'admin' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true })
  })
  await admin.register(adminPlugin, { isReady: () => listening })

  return {
    traffic,
    admin,
    logger,
    sessionStore,
    runtime: () => runtime,
    isReady: () => listening,
    async listen(overrides = {}) {
      const trafficUrl = await traffic.listen({ host: overrides.host ?? config.listen.host, port: overrides.trafficPort ?? config.listen.port })
      const adminUrl = await admin.listen({ host: overrides.host ?? config.admin.host, port: overrides.adminPort ?? config.admin.port })
      listening = true
      return { trafficUrl, adminUrl }
    },
    async close() {
      listening = false
      await traffic.close()
      await admin.close()
      await upstream.close()
    }
  }
}
