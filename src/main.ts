import { buildGateway, type Gateway } from './app.js'
import { loadConfig } from './config/load-config.js'
import type { GatewayConfig } from './config/schema.js'
import { createLogger } from './observability/logger.js'
import { createSimulator, type Simulator } from './simulator/index.js'
import { selectUpstreamUrl, usesEmbeddedUpstream } from './tenancy/tenant-runtime.js'

export interface RunningGateway {
  gateway: Gateway
  simulator: Simulator | undefined
  trafficUrl: string
  adminUrl: string
  stop(): Promise<void>
}

/** Starts the built-in simulator for `embedded` upstreams on a loopback port (SPEC 3, 11). */
async function startEmbeddedSimulator(config: GatewayConfig): Promise<{ simulator?: Simulator; origin?: string }> {
  if (!usesEmbeddedUpstream(config)) return {}
  const simulator = createSimulator()
  return { simulator, origin: await simulator.listen({ host: '127.0.0.1', port: 0 }) }
}

/**
 * The process entry: load config, start, and own the signals. The only module that
 * touches `process` besides the CLI.
 */
export async function runGateway(configPath: string): Promise<RunningGateway> {
  const config = await loadConfig(configPath)
  const logger = createLogger({ level: config.log.level })
  const { simulator, origin: embeddedOrigin } = await startEmbeddedSimulator(config)
  const gateway = await buildGateway({ config, logger, embeddedOrigin })
  const { trafficUrl, adminUrl } = await gateway.listen()

  for (const [name, tenant] of Object.entries(config.tenants)) {
    const runtimeTenant = gateway.runtime().tenancy.tenants.get(name)
    logger.info({ tenant: name, target: tenant.upstream.target, upstream: selectUpstreamUrl(tenant), origin: runtimeTenant?.upstreamOrigin }, 'tenant upstream')
  }
  logger.info({ trafficUrl, adminUrl, config: configPath }, 'v4gw listening')

  let stopping: Promise<void> | undefined
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      await gateway.close()
      await simulator?.close()
    })()
    return stopping
  }

  const onSignal = (signal: NodeJS.Signals): void => {
    logger.info({ signal, graceMs: config.shutdown.graceMs }, 'shutting down')
    const deadline = setTimeout(() => {
      logger.warn({ graceMs: config.shutdown.graceMs }, 'grace period over: closing remaining connections')
      gateway.traffic.server.closeAllConnections()
    }, config.shutdown.graceMs)
    deadline.unref()
    stop().then(
      () => {
        logger.flush()
        process.exit(0)
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed')
        process.exit(1)
      }
    )
  }
  process.once('SIGTERM', onSignal)
  process.once('SIGINT', onSignal)

  return { gateway, simulator, trafficUrl, adminUrl, stop }
}
