import { buildGateway, type Gateway } from './app.js'
import { loadConfig } from './config/load-config.js'
import type { HeldSignals } from './held-signals.js'
import { createLogger, createStdoutDestination } from './observability/logger.js'
import { createSimulator, type Simulator } from './simulator/index.js'
import { createLegacySimulator, type LegacySimulator } from './app/legacy-simulator.js'
import { selectUpstreamUrl, usesEmbeddedLegacy, usesEmbeddedUpstream } from './tenancy/tenant-runtime.js'

export interface RunningGateway {
  gateway: Gateway
  trafficUrl: string
  adminUrl: string
  /** Every address each listener is bound to (SPEC 18), a wildcard as itself. */
  trafficUrls: string[]
  adminUrls: string[]
  /** Drains and stops; resolves once in-flight requests are done or `shutdown.graceMs` passed. */
  stop(): Promise<void>
}

/** The built-in simulator for `embedded` upstreams, started once, on a loopback port (SPEC 3, 11). */
function embeddedSimulator(): { start(): Promise<string>; close(): Promise<void> } {
  let simulator: Simulator | undefined
  let origin: Promise<string> | undefined
  return {
    start() {
      // Not recording calls: that is for tests, and this process may run for weeks. No test
      // controls either: a tenant with `fallback: proxy` would hand them to every client.
      simulator ??= createSimulator({ recordCalls: false, controlRoutes: false })
      origin ??= simulator.listen({ host: '127.0.0.1', port: 0 })
      return origin
    },
    close: async () => simulator?.close()
  }
}

/** SPEC 14.1's embedded legacy backend for `upstream.legacy: embedded`, started once, on a loopback port. */
function embeddedLegacyBackend(): { start(): Promise<string>; close(): Promise<void> } {
  let backend: LegacySimulator | undefined
  let origin: Promise<string> | undefined
  return {
    start() {
      backend ??= createLegacySimulator()
      origin ??= backend.listen({ host: '127.0.0.1', port: 0 })
      return origin
    },
    close: async () => backend?.close()
  }
}

/**
 * The gateway process: load config, start, and own the signals (those that came while it
 * started, `held` since cli.ts parsed its command line, are acted on once it is up). With the
 * CLI and held-signals.ts, the only code that touches `process`.
 */
export async function runGateway(configPath: string, held: HeldSignals): Promise<RunningGateway> {
  const config = await loadConfig(configPath)
  const logDestination = createStdoutDestination()
  const logger = createLogger({ level: config.log.level, destination: logDestination.stream })
  // Buffered lines must reach stdout however the process ends.
  process.once('exit', () => logDestination.flushSync())
  logger.info({ config: configPath }, 'v4gw starting')
  const simulator = embeddedSimulator()
  const embeddedOrigin = usesEmbeddedUpstream(config) ? await simulator.start() : undefined
  const legacyBackend = embeddedLegacyBackend()
  const embeddedLegacyOrigin = usesEmbeddedLegacy(config) ? await legacyBackend.start() : undefined
  const gateway = await buildGateway({ config, configPath, logger, logLinesDropped: logDestination.droppedLines, embeddedOrigin, startEmbedded: simulator.start, embeddedLegacyOrigin, startEmbeddedLegacy: legacyBackend.start })
  const { trafficUrl, adminUrl, trafficUrls, adminUrls } = await gateway.listen()

  for (const [name, tenant] of gateway.runtime().tenancy.tenants) {
    logger.info({ tenant: name, target: tenant.upstreamTarget, upstream: selectUpstreamUrl(config.tenants[name]!), origin: tenant.upstreamOrigin, legacyOrigin: tenant.legacyOrigin }, 'tenant upstream')
  }
  // The Node flags in effect (node-flags.ts), so an operator can see the process got them.
  logger.info({ trafficUrl, adminUrl, trafficUrls, adminUrls, config: configPath, nodeFlags: process.execArgv }, 'v4gw listening')

  let stopping: Promise<void> | undefined
  function stop(): Promise<void> {
    stopping ??= (async () => {
      const graceMs = gateway.runtime().config.shutdown.graceMs
      gateway.startDraining()
      // In-flight requests get `graceMs`; whatever is still open then is cut.
      const deadline = setTimeout(() => {
        logger.warn({ graceMs }, 'grace period over: closing the remaining connections and upstream calls')
        gateway.cutRemaining()
      }, graceMs)
      try {
        await gateway.close()
        await simulator.close()
        await legacyBackend.close()
      } finally {
        clearTimeout(deadline)
      }
    })()
    return stopping
  }

  function onStopSignal(signal: NodeJS.Signals): void {
    // A second signal (an orchestrator that repeats SIGTERM, a second Ctrl-C) changes nothing:
    // the drain already under way ends by `shutdown.graceMs` at the latest.
    if (stopping !== undefined) {
      logger.info({ signal }, 'already draining; the signal changes nothing')
      return
    }
    logger.info({ signal, graceMs: gateway.runtime().config.shutdown.graceMs }, 'draining: readiness is false, no new connections')
    stop().then(
      () => {
        logger.info('stopped')
        process.exit(0)
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed')
        process.exit(1)
      }
    )
  }
  // `on`, not `once`: with no listener left, Node's default would end the process mid-drain.
  process.on('SIGTERM', onStopSignal)
  process.on('SIGINT', onStopSignal)
  process.on('SIGHUP', function reloadOnHangup() {
    void gateway.reload()
  })
  held.release()
  if (held.stop !== undefined) onStopSignal(held.stop)
  else if (held.reload) void gateway.reload()

  return { gateway, trafficUrl, adminUrl, trafficUrls, adminUrls, stop }
}
