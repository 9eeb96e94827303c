import { canonicalJson } from '../util/canonical-json.js'
import type { Logger } from 'pino'
import type { ReloadResult } from '../admin/admin-plugin.js'
import { ConfigError, loadConfig } from '../config/load-config.js'
import { tenantsWithLegacyUpstreamOn, type GatewayConfig } from '../config/schema.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import type { ClientRegistry } from '../fleet/client-registry.js'
import type { SessionStore } from '../sessions/session-store.js'
import { buildGatewayRuntime, type GatewayRuntime } from '../tenancy/gateway-runtime.js'
import { listUpcomingBrownouts } from '../tenancy/deprecation-policy.js'
import { usesEmbeddedLegacy, usesEmbeddedUpstream } from '../tenancy/tenant-runtime.js'

/** Keys that need a restart: they shape listeners and pools built once. */
export const RESTART_ONLY_KEYS = ['listen', 'admin.host', 'admin.port', 'limits.connectTimeoutMs', 'limits.maxEventLoopDelayMs', 'sessions.maxEntries', 'sessions.ttlMs', 'sessions.store', 'sessions.redis', 'store', 'tracing.enabled', 'tracing.endpoint', 'tracing.protocol', 'tracing.headers', 'tracing.serviceName', 'tracing.maxQueueSpans', 'tracing.batchDelayMs'] as const

export interface ConfigReloadDeps {
  /** The config the gateway started with: restart-only keys keep its values until a restart. */
  startConfig: GatewayConfig
  /** The runtime built from `startConfig`, in effect until the first reload. */
  runtime: GatewayRuntime
  embeddedOrigin: string | undefined
  /** The file `reload()` re-reads; without one, a reload is refused. */
  configPath: string | undefined
  /** Starts the simulator when a reloaded config needs one and none runs yet. */
  startEmbedded: (() => Promise<string>) | undefined
  /** Starts the embedded legacy backend (SPEC 14.1) when a reloaded config needs one and none runs yet. */
  startEmbeddedLegacy?: (() => Promise<string>) | undefined
  /** The traffic listener's bound address once it listens (`listen` is restart-only, and a caller may have overridden it). */
  listenAddress?: (() => { host: string; port: number } | undefined) | undefined
  logger: Logger
  sessionStore: SessionStore
  migration: ClientRegistry
  metrics: GatewayMetrics
}

export interface ConfigReloader {
  /** The runtime in effect: read once per request, so a reload never splits a request. */
  runtime(): GatewayRuntime
  applyConfig(config: GatewayConfig, embeddedOrigin?: string): Promise<{ sessionsDropped: number; restartRequired: string[] }>
  reload(): Promise<ReloadResult>
}

function readKey(config: GatewayConfig, key: string): unknown {
  return key.split('.').reduce<unknown>((value, part) => (value as Record<string, unknown>)[part], config)
}

/** Owns the runtime in effect and swaps it, from a file (SPEC 8) or from a validated config. */
export function createConfigReloader(deps: ConfigReloadDeps): ConfigReloader {
  const { startConfig, configPath, logger, sessionStore, migration, metrics } = deps
  let runtime = deps.runtime
  let embeddedOrigin = deps.embeddedOrigin
  let embeddedLegacyOrigin = deps.runtime.context.embeddedLegacyOrigin

  async function applyConfig(config: GatewayConfig, origin = embeddedOrigin): Promise<{ sessionsDropped: number; restartRequired: string[] }> {
    const previous = runtime
    // SPEC 13-14: pauses, overrides, the fleet id and the embedded legacy backend outlive a reload.
    const next = buildGatewayRuntime(config, origin, { ...previous.context, embeddedLegacyOrigin })
    runtime = next
    embeddedOrigin = origin
    logger.level = config.log.level
    // Against the values in effect, the start's: a key changed by an earlier reload is still
    // pending, and one set back to its running value no longer is.
    // Canonical JSON: a map written in another order (tracing.headers) is the same value.
    const restartRequired = RESTART_ONLY_KEYS.filter((key) => canonicalJson(readKey(startConfig, key)) !== canonicalJson(readKey(config, key)))
    if (restartRequired.length > 0) logger.warn({ keys: restartRequired }, 'these keys differ from the running values and take effect only after a restart')
    for (const [name, tenant] of Object.entries(config.tenants)) {
      const before = previous.config.tenants[name]?.clients.key
      // SPEC 17: a client id is only as stable as its sources.
      if (before !== undefined && before.join('\n') !== tenant.clients.key.join('\n')) {
        logger.warn({ tenant: name, before, after: tenant.clients.key }, 'clients.key changed: every client id of this tenant changes')
      }
    }
    const drops: (number | Promise<number>)[] = []
    for (const [name, tenant] of previous.tenancy.tenants) {
      // Only the sessions on the upstream the tenant left: with Redis, replicas that reloaded
      // first may already have stored sessions of the new one (SPEC 8, docs/scaling.md).
      if (next.tenancy.tenants.get(name)?.upstreamOrigin !== tenant.upstreamOrigin) drops.push(sessionStore.clear(name, tenant.upstreamOrigin))
    }
    const configured = (tenant: string, route: string): boolean => next.tenancy.tenants.get(tenant)?.routes.some((r) => `${r.method} ${r.path}` === route) === true
    migration.applyBounds()
    metrics.setStatusCodeLabel(config.metrics.statusCodeLabel)
    // SPEC 17: series of tenants and legacy routes the reload removed go too.
    const metricsRetained = metrics.retain((tenant, route) => (route === '' || route === 'native' ? next.tenancy.tenants.has(tenant) : configured(tenant, route)))
    // Everything above applies before this first wait. A shared store answers later, and its
    // clear falls back to this replica's own entries when Redis fails (logged there).
    await metricsRetained
    let sessionsDropped = 0
    for (const drop of await Promise.allSettled(drops)) {
      if (drop.status === 'fulfilled') sessionsDropped += drop.value
      else logger.warn({ err: drop.reason }, 'dropping the session-map entries of a moved tenant failed; the count leaves them out')
    }
    return { sessionsDropped, restartRequired }
  }

  // One reload at a time, each reading the file when its turn comes: a SIGHUP and a POST
  // /admin/reload close together must not let the older read apply last (SPEC 8).
  let reloading: Promise<unknown> = Promise.resolve()

  function reload(): Promise<ReloadResult> {
    const turn = reloading.then(reloadOnce)
    reloading = turn
    return turn
  }

  async function reloadOnce(): Promise<ReloadResult> {
    if (configPath === undefined) return { ok: false, problems: ['this gateway was not started from a config file'] }
    try {
      const config = await loadConfig(configPath)
      // SPEC 14: not the running listener's address either (the file's `listen` waits for a restart).
      const looping = tenantsWithLegacyUpstreamOn(config.tenants, deps.listenAddress?.() ?? startConfig.listen)
      if (looping.length > 0) {
        throw new ConfigError(configPath, looping.map((name) => `tenants.${name}.upstream.legacy: this is the running traffic listener's address (listen changes only at a restart): the legacy upstream must be another server`))
      }
      let origin = embeddedOrigin
      if (origin === undefined && usesEmbeddedUpstream(config)) {
        if (deps.startEmbedded === undefined) throw new ConfigError(configPath, ['a tenant uses the embedded simulator, which this gateway cannot start'])
        origin = await deps.startEmbedded()
      }
      if (embeddedLegacyOrigin === undefined && usesEmbeddedLegacy(config)) {
        if (deps.startEmbeddedLegacy === undefined) throw new ConfigError(configPath, ['a tenant uses the embedded legacy backend (upstream.legacy: embedded), which this gateway cannot start'])
        embeddedLegacyOrigin = await deps.startEmbeddedLegacy()
      }
      const { sessionsDropped, restartRequired } = await applyConfig(config, origin)
      metrics.observeReload('success')
      const tenants = Object.keys(config.tenants)
      // SPEC 13: the brownout windows open now or within 24 h, so that whoever reloads sees them coming.
      const upcomingBrownouts = listUpcomingBrownouts(config.tenants, Date.now())
      logger.info({ config: configPath, tenants, sessionsDropped, restartRequired, upcomingBrownouts }, 'config reloaded')
      return { ok: true, tenants, sessionsDropped, restartRequired, upcomingBrownouts }
    } catch (error) {
      metrics.observeReload('failure')
      const problems = error instanceof ConfigError ? error.problems : [String((error as Error).message)]
      logger.error({ config: configPath, problems }, 'config reload rejected; the running config stays')
      return { ok: false, problems }
    }
  }

  return { runtime: () => runtime, applyConfig, reload }
}
