import type { Server } from 'node:http'
import type { Logger } from 'pino'
import { configSchema } from '../config/schema.js'
import { closeServer, createTrafficServer, listen } from '../kernel/traffic-server.js'
import { createLogger } from '../observability/logger.js'
import { createMemorySessionStore } from '../sessions/session-store.js'
import { createSessionMap } from '../sessions/session-map.js'
import { createSimulator, type Simulator, type SimulatorOptions } from '../simulator/index.js'
import { buildGatewayRuntime, randomFleetId } from '../tenancy/gateway-runtime.js'
import { createTrafficHandler, type TrafficHandler } from '../traffic/traffic-handler.js'
import { createUpstreamClient, type UpstreamClient, type UpstreamResponse } from '../upstream/upstream-client.js'

/**
 * The request header that would select a tenant of the legacy backend's own translation: a name
 * no client sends, so that the gateway's `x-tenant-id`, passed on unchanged (SPEC 7), selects nothing.
 */
export const LEGACY_SIMULATOR_TENANCY_HEADER = 'x-v4gw-legacy-simulator-tenant'

export interface LegacySimulatorOptions {
  /** The identities and defaults of its own V4 backend, as for the V4 simulator (SPEC 11). */
  simulator?: Omit<SimulatorOptions, 'recordCalls' | 'controlRoutes' | 'logger'>
  /** Its access lines; silent by default (it runs inside the gateway). */
  logger?: Logger
}

export interface LegacySimulator {
  /** Listens (127.0.0.1, a free port by default) and resolves with its origin. */
  listen(options?: { host?: string; port?: number }): Promise<string>
  close(): Promise<void>
}

/**
 * SPEC 14.1's embedded legacy backend: the legacy-v1 routes of SPEC 4, answered exactly as the
 * gateway answers them in stage `translate` from the embedded V4 simulator, so that a shadow
 * comparison of the two matches and `npm start` shows every stage with no other process.
 *
 * It is that by construction: the gateway's own planner and runner (one tenant on the default
 * legacy-v1 table and the default credential rules) in front of a V4 simulator of its own, with
 * its own session map, so its `stateId` sessions are its own. Nothing of the gateway's is shared
 * but the code: its own fleet id (a request the gateway sends it carries the gateway's `Via`), its
 * own upstream pool, no metrics, no store. docs/decisions.md says why it is not a second,
 * hand-written translation.
 */
export function createLegacySimulator(options: LegacySimulatorOptions = {}): LegacySimulator {
  const logger = options.logger ?? createLogger({ level: 'silent' })
  const v4: Simulator = createSimulator({ ...options.simulator, recordCalls: false, controlRoutes: false })
  let started: Promise<{ server: Server; handler: TrafficHandler; upstream: UpstreamClient; origin: string }> | undefined
  let closing: Promise<void> | undefined

  async function start(host: string, port: number) {
    const v4Origin = await v4.listen({ host: '127.0.0.1', port: 0 })
    const config = configSchema.parse({
      log: { level: 'silent' },
      tenancy: { header: LEGACY_SIMULATOR_TENANCY_HEADER, default: 'legacy' },
      tenants: { legacy: { upstream: { staging: v4Origin } } }
    })
    const runtime = buildGatewayRuntime(config, undefined, { processFleetId: randomFleetId() })
    const upstream = createUpstreamClient({ connectTimeoutMs: config.limits.connectTimeoutMs })
    const sessions = createSessionMap<UpstreamResponse>(createMemorySessionStore({ maxEntries: config.sessions.maxEntries, ttlMs: config.sessions.ttlMs }))
    const handler = createTrafficHandler({ getRuntime: () => runtime, upstream, sessions, logger, isDraining: () => closing !== undefined, onRequestDone: () => undefined })
    const server = createTrafficServer(handler, logger)
    const origin = await listen(server, host, port)
    return { server, handler, upstream, origin }
  }

  return {
    async listen({ host = '127.0.0.1', port = 0 } = {}) {
      started ??= start(host, port)
      return (await started).origin
    },
    close() {
      closing ??= (async () => {
        const running = await started?.catch(() => undefined)
        if (running !== undefined) {
          await closeServer(running.server, 0)
          running.handler.stop()
          await running.upstream.close()
        }
        await v4.close()
      })()
      return closing
    }
  }
}
