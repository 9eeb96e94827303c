import { buildGateway, type Gateway } from '../../src/app.js'
import { deepFreeze } from '../../src/util/deep-freeze.js'
import { configSchema, type GatewayConfig } from '../../src/config/schema.js'
import { createLogger } from '../../src/observability/logger.js'
import { createLogSink, type LogSink } from './log-sink.js'
import { once, ownedBySuite, ownedByTest } from './teardown.js'

export interface StartedGateway {
  url: string
  adminUrl: string
  gateway: Gateway
  config: GatewayConfig
  logs: LogSink
  close(): Promise<void>
}

/** A config with one tenant `acme` on `upstreamUrl`; `overrides` are merged at the top level. */
export function testConfig(upstreamUrl: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    log: { level: 'info' },
    tenancy: { default: 'acme' },
    tenants: { acme: { upstream: { staging: upstreamUrl } } },
    ...overrides
  }
}

export interface GatewayOptions {
  configPath?: string
  /** What starts the embedded simulator when a reloaded config first needs it (main.ts passes the real one). */
  startEmbedded?: () => Promise<string>
}

/**
 * The real gateway on 127.0.0.1 port 0, both listeners, logging JSON at `info` into a sink
 * the test can read. `rawConfig` goes through the same zod schema as a config file.
 */
async function launchGateway(rawConfig: Record<string, unknown>, options: GatewayOptions): Promise<StartedGateway> {
  // Frozen as loadConfig freezes it, so that a test fails where the gateway would mutate its config.
  const config = deepFreeze(configSchema.parse(rawConfig))
  const logs = createLogSink()
  // The production logger (main.ts makes the same), so the access line is written as in production.
  const logger = createLogger({ level: config.log.level, destination: logs.stream })
  const gateway = await buildGateway({ config, logger, configPath: options.configPath, startEmbedded: options.startEmbedded })
  const { trafficUrl, adminUrl } = await gateway.listen({ host: '127.0.0.1', trafficPort: 0, adminPort: 0 })
  return { url: trafficUrl, adminUrl, gateway, config, logs, close: once(() => gateway.close()) }
}

/** A gateway for the running test, closed when it finishes (see ./teardown.ts). */
export function startGateway(rawConfig: Record<string, unknown>, options: GatewayOptions = {}): Promise<StartedGateway> {
  return ownedByTest('startGateway', () => launchGateway(rawConfig, options), (started) => started.close())
}

/**
 * A gateway for every test of the enclosing describe, closed after the last one. `rawConfig`
 * is called in the beforeAll, so it may use the URL of an upstream declared above it.
 */
export function useGateway(rawConfig: () => Record<string, unknown> | Promise<Record<string, unknown>>, options: GatewayOptions = {}): StartedGateway {
  return ownedBySuite('useGateway', async () => launchGateway(await rawConfig(), options), (started) => started.close())
}
