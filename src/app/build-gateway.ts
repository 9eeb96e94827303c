import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify'
import { adminPlugin } from '../admin/admin-plugin.js'
import { sendGatewayError } from '../admin/send-gateway-error.js'
import { configHash } from '../config/config-hash.js'
import { toGatewayError } from '../errors/registry.js'
import { answerClientError, answerConnect } from '../kernel/client-error.js'
import { createTrafficServer, listen } from '../kernel/traffic-server.js'
import { createLogger, createStdoutDestination } from '../observability/logger.js'
import { ShadowResults, type ShadowOutcome } from '../fleet/shadow-results.js'
import { createMetrics } from '../observability/metrics.js'
import { createTracing } from '../tracing/tracing.js'
import { boundsFromConfig, ClientRegistry } from '../fleet/client-registry.js'
import { resolveRequestId } from '../observability/request-id.js'
import { explainRequestWithRecords } from '../plan/explain-request.js'
import { createSessionStore } from '../sessions/create-session-store.js'
import { createSessionMap } from '../sessions/session-map.js'
import { createSharedIdempotencyStore } from '../sessions/shared-idempotency-store.js'
import { createSharedStore } from '../store/shared-store.js'
import { BrownoutPauses } from '../tenancy/brownout-pauses.js'
import { StageOverrideRecords } from '../tenancy/stage-override-records.js'
import { buildGatewayRuntime, randomFleetId, type GatewayRuntime } from '../tenancy/gateway-runtime.js'
import { resolveEffectiveStage } from '../tenancy/migration-policy.js'
import { createLiveClaims } from '../traffic/run-idempotent.js'
import { createTrafficHandler, type FinishedRequest } from '../traffic/traffic-handler.js'
import { upstreamFailureCause } from '../upstream/map-upstream-error.js'
import { createUpstreamClient, type UpstreamResponse } from '../upstream/upstream-client.js'
import type { Gateway, GatewayOptions } from './gateway.js'
import { createConfigReloader } from './reload.js'
import { recordInRegistry } from './record-in-registry.js'
import { gatewayVersion } from './version.js'
import { createShutdown } from './shutdown.js'

/** The composition root: builds both listeners without opening a socket. */
export async function buildGateway(options: GatewayOptions): Promise<Gateway> {
  // A logger of its own writes through a batch that nothing else flushes: close() does, last.
  const ownLog = options.logger === undefined ? createStdoutDestination() : undefined
  const logger = options.logger ?? createLogger({ level: options.config.log.level, destination: ownLog?.stream })
  let listening = false
  const initial = options.config
  // SPEC 12: one store (and with Redis one connection) for every feature that shares state.
  // The metrics are made after it (they read its state); what it counts comes only with traffic.
  const store = await createSharedStore({
    kind: initial.store.kind,
    url: initial.store.redis.url,
    keyPrefix: initial.store.redis.keyPrefix,
    logger,
    onUnavailable: (feature) => metrics.observeStoreUnavailable(feature)
  })
  // SPEC 13's pauses are the fleet's with Redis: loaded before the first request is served.
  const brownoutPauses = new BrownoutPauses(store, logger)
  // SPEC 14's overrides likewise: a restarted replica rolls back from its first request.
  const stageOverrides = new StageOverrideRecords(store, logger)
  await Promise.all([brownoutPauses.start(), stageOverrides.start()])
  // SPEC 14: with `store: memory` this gateway's fleet is itself, under an id of its own.
  const runtime = buildGatewayRuntime(options.config, options.embeddedOrigin, { brownoutPauses, stageOverrides, embeddedLegacyOrigin: options.embeddedLegacyOrigin, processFleetId: randomFleetId() })
  const sessionStore = options.sessionStore ?? createSessionStore(initial, store, logger, { onCapacityEvict: () => metrics.observeSessionEvent('capacity-evicted') }, () => reloader.runtime().config.limits)
  const upstream = createUpstreamClient({ connectTimeoutMs: initial.limits.connectTimeoutMs })
  // SPEC 15: comparisons never take the clients' connections, and their pool is destroyed as
  // shutdown abandons them (undici cannot cut a call still connecting; closing would wait for it).
  const shadowUpstream = createUpstreamClient({ connectTimeoutMs: initial.limits.connectTimeoutMs })
  const metrics = createMetrics({
    sessionEntries: () => sessionStore.size,
    sessionStoreStatus: () => sessionStore.describe(),
    storeUp: store.kind === 'redis' ? () => store.isUp() : undefined,
    clockOffsetSeconds: store.kind === 'redis' ? () => store.clockOffsetSeconds() : undefined,
    configHash: () => configHash(reloader.runtime().config),
    // Read at each scrape; the handler exists by the time anything scrapes.
    requestsInFlight: () => trafficHandler.inFlight(),
    statusCodeLabel: initial.metrics.statusCodeLabel,
    version: gatewayVersion(),
    migrationStages: () => routeStages(reloader.runtime()),
    brownoutsPaused: () => pausedTenants(reloader.runtime()),
    migrationOverrides: () => overridesByTenant(reloader.runtime(), stageOverrides),
    logLinesDropped: ownLog?.droppedLines ?? options.logLinesDropped
  })
  // SPEC 17: spans only with tracing.enabled (restart-only); without it nothing of tracing is built.
  const tracing = initial.tracing.enabled
    ? createTracing({ config: initial.tracing, version: gatewayVersion(), logger, onSpansDropped: (reason, count) => metrics.observeSpansDropped(reason, count) })
    : undefined
  if (tracing !== undefined) {
    // The series exist from the start, so an alert on their rate has something to read.
    metrics.observeSpansDropped('queue_full', 0)
    metrics.observeSpansDropped('export_failed', 0)
    metrics.observeSpansDropped('shut_down', 0)
    // No userinfo in the endpoint (config/url-schemas.ts), and its query, where a vendor's key
    // may sit, is not logged; neither are the headers.
    logger.info({ endpoint: withoutQuery(initial.tracing.endpoint), protocol: initial.tracing.protocol, sampleRatio: initial.tracing.sampleRatio }, 'tracing: exporting spans over OTLP')
  }
  // SPEC 12's client registry: counted in memory, the fleet's with Redis (written every store.flushMs).
  const migration = new ClientRegistry({ store, bounds: boundsFromConfig(() => reloader.runtime().config), flushMs: initial.store.flushMs, configHash: () => configHash(reloader.runtime().config), logger })
  // SPEC 15's results: counted in memory, the fleet's with Redis (written every store.flushMs).
  const shadowResults = new ShadowResults({ store, logger, flushMs: initial.store.flushMs, onOutcome: observeShadowOutcome })
  await shadowResults.start()
  function observeShadowOutcome(tenant: string, route: string, outcome: ShadowOutcome): void {
    metrics.observeShadow(tenant, route, outcome)
  }
  const sessions = createSessionMap<UpstreamResponse>(sessionStore, {
    onEvict: () => metrics.observeSessionEvent('evicted'),
    // SPEC 17: a failed sessions.start is counted here, once, however many requests shared it and
    // whether or not the client of the one that sent it stayed (its record may be reported already).
    onStartFailed: (tenant, error) => {
      const cause = upstreamFailureCause(toGatewayError(error))
      // Not for a tenant a reload removed meanwhile (SPEC 17: its series went with it).
      if (cause !== undefined && reloader.runtime().tenancy.tenants.has(tenant)) metrics.observeUpstreamFailure(tenant, 'v4', cause)
    }
  })
  const reloader = createConfigReloader({
    startConfig: initial,
    runtime,
    embeddedOrigin: options.embeddedOrigin,
    configPath: options.configPath,
    startEmbedded: options.startEmbedded,
    startEmbeddedLegacy: options.startEmbeddedLegacy,
    listenAddress: () => {
      const bound = trafficServer.address()
      return bound !== null && typeof bound === 'object' ? { host: bound.address, port: bound.port } : undefined
    },
    logger,
    sessionStore,
    migration,
    metrics
  })

  const getRuntime = reloader.runtime
  // `shutdown` is made last, as it closes what follows; the traffic handler and the admin
  // listener ask it whether the gateway drains only once requests come.
  const isDraining = (): boolean => shutdown.isDraining()

  /** Every finished request: its metrics and, for a legacy route, the migration report (SPEC 12). */
  function onRequestDone({ head, record, statusCode, durationMs }: FinishedRequest): void {
    const current = getRuntime()
    // SPEC 17: series of tenants and routes a reload removed are removed; a request that ends
    // after that reload (a long stream, a keyed call whose client left) brings none back. Two map lookups.
    const removed = record.tenant === undefined ? undefined : removedBy(current, record.tenant, record.legacyRoute)
    metrics.observeRequest({
      tenant: record.tenant,
      trafficClass: record.trafficClass,
      route: record.legacyRoute,
      statusCode,
      durationMs,
      upstreamMs: record.upstreamMs,
      errorCode: record.errorCode,
      shedReason: record.shedReason,
      // Once per failed call (SPEC 17): a failed sessions.start (SPEC 4 step 3) is counted by the
      // session map, so the requests that sent or shared it report its cause without counting it.
      upstreamFailure: record.failedStart === undefined ? record.upstreamFailure : undefined,
      deprecationAction: record.deprecationAction,
      idempotencyOutcome: record.idempotencyOutcome,
      servedBy: record.servedBy,
      removed
    })
    if (record.sessionOutcome !== undefined) metrics.observeSessionEvent(record.sessionOutcome)
    // SPEC 12/16: a keyed request this replica's memory served because the store did not answer.
    if (record.idempotencyOutcome === 'store_unavailable') store.countUnavailable('idempotency')
    if (removed === undefined) recordInRegistry(migration, current, head, record)
  }

  // SPEC 16's records live as long as the process (or in the shared store), whatever a reload says (SPEC 17).
  const idempotency = createSharedIdempotencyStore(store)
  const liveClaims = createLiveClaims()
  // SPEC 17: a comparison's V4 call that gave no answer is an upstream failure labelled `shadow`.
  const onShadowUpstreamFailure = (tenant: string, cause: string): void => metrics.observeUpstreamFailure(tenant, 'shadow', cause)
  const trafficHandler = createTrafficHandler({ getRuntime, upstream, sessions, idempotency, liveClaims, logger, isDraining, onRequestDone, shadowResults, onShadowUpstreamFailure, shadowUpstream, tracing })
  const trafficServer = createTrafficServer(trafficHandler, logger, (refusal, refused) => {
    metrics.observeRequest({ tenant: undefined, trafficClass: undefined, route: undefined, statusCode: refusal.statusCode, durationMs: 0, upstreamMs: undefined, errorCode: refusal.code })
    trafficHandler.logRefusedUnread(refusal, refused)
  })

  const adminLog = logger.child({ listener: 'admin' })
  const admin = Fastify({
    loggerInstance: adminLog as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    // SPEC 6's request id on the admin listener's errors too: a valid incoming one, else a UUID.
    genReqId: (request) => resolveRequestId(request.headers['x-request-id']),
    // The envelope for what fastify and Node refuse before a route runs too (an undecodable URL,
    // malformed HTTP), as on the traffic listener.
    frameworkErrors: (error, request, reply) => sendGatewayError(error, request, reply),
    clientErrorHandler: (error, socket) => answerClientError(adminLog, error, socket),
    // SPEC 18: the probes and /metrics answer whatever the Host, none included (a bare Node 400
    // otherwise); /admin/* without one names nothing and gets the guard's 403 envelope.
    http: { requireHostHeader: false }
  })
  admin.server.on('connect', (_request: IncomingMessage, socket: Duplex) => answerConnect(adminLog, socket))
  // An Expect other than 100-continue is ignored, as RFC 9110 10.1.1 allows and the traffic
  // listener does, rather than Node's bare 417 on a probe.
  admin.server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => admin.server.emit('request', request, response))
  const isReady = (): boolean => listening && !shutdown.isDraining()
  /** The host the admin listener binds: restart-only, so the start's (or a test's override). */
  let adminHost: string | undefined
  await admin.register(adminPlugin, {
    isReady,
    adminToken: () => getRuntime().config.admin.token,
    allowedHosts: () => getRuntime().config.admin.allowedHosts,
    listenerHost: () => adminHost,
    configHash: () => configHash(getRuntime().config),
    metrics,
    sessionStore,
    migration,
    reload: reloader.reload,
    explain: (input) => explainRequestWithRecords(getRuntime(), input, idempotency),
    runtime: getRuntime,
    shadow: shadowResults,
    stageOverrides
  })

  const shutdown = createShutdown({
    trafficServer,
    trafficHandler,
    admin,
    upstream,
    shadowUpstream,
    sessionStore,
    ownsSessionStore: options.sessionStore === undefined,
    // SPEC 16: at the end of the grace period the claims of requests still running are settled
    // (deleted when no execution was sent) before the store's connection closes.
    cutClaims: () => liveClaims.cut(idempotency),
    store: {
      async close() {
        brownoutPauses.stop()
        stageOverrides.stop()
        // Its last counts go to the store before the connection closes.
        await migration.close()
        await shadowResults.stop()
        await store.close()
      }
    },
    idleCloseMs: () => getRuntime().config.shutdown.idleCloseMs,
    tracing,
    graceMs: () => getRuntime().config.shutdown.graceMs
  })

  return {
    trafficServer,
    admin,
    logger,
    sessionStore,
    store,
    metrics,
    migration,
    shadow: shadowResults,
    runtime: getRuntime,
    isReady,
    reload: reloader.reload,
    applyConfig: reloader.applyConfig,
    startDraining: shutdown.startDraining,
    async listen(overrides = {}) {
      const config = getRuntime().config
      const trafficUrl = await listen(trafficServer, overrides.host ?? config.listen.host, overrides.trafficPort ?? config.listen.port)
      adminHost = overrides.host ?? config.admin.host
      await admin.listen({
        host: adminHost,
        port: overrides.adminPort ?? config.admin.port,
        // fastify names each interface a wildcard reaches; what the listener is bound to is in `v4gw listening`.
        listenTextResolver: (address) => `admin listener reachable at ${address}`
      })
      // fastify binds every address a name such as `localhost` resolves to; the first is the one asked for.
      const adminUrls = [...new Set([admin.server.address(), ...admin.addresses()].filter(isAddressInfo).map(urlOf))]
      // SPEC 10's event-loop limit from the ready line on: the start-up before it is no stalled loop.
      trafficHandler.startSampling()
      listening = true
      return { trafficUrl, adminUrl: adminUrls[0] as string, trafficUrls: [trafficUrl], adminUrls }
    },
    close: ownLog === undefined ? shutdown.close : () => shutdown.close().finally(() => ownLog.flushSync()),
    cutRemaining: shutdown.cutRemaining
  }
}

function isAddressInfo(address: AddressInfo | string | null): address is AddressInfo {
  return address !== null && typeof address === 'object'
}

/** The URL of a bound address: a wildcard as itself (`http://0.0.0.0:9901`), not as loopback. */
function urlOf(address: AddressInfo): string {
  return `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
}

/** SPEC 14's v4gw_migration_stage: each configured legacy route and its effective stage now (overrides applied). */
function routeStages(runtime: GatewayRuntime): [string, string, string][] {
  const nowMs = Date.now()
  const stages: [string, string, string][] = []
  for (const [name, tenant] of runtime.tenancy.tenants) {
    for (const [route, configured] of tenant.migration) {
      stages.push([name, route, resolveEffectiveStage(configured, tenant.legacyOrigin !== undefined, runtime.stageOverrides, name, route, nowMs).stage])
    }
  }
  return stages
}

/** SPEC 13's v4gw_brownouts_paused: each configured tenant, and whether a pause of it or of one of its routes is in force now. */
function pausedTenants(runtime: GatewayRuntime): [string, boolean][] {
  const paused = new Set(runtime.brownoutPauses.list(Date.now()).map((pause) => pause.tenant))
  return Object.keys(runtime.config.tenants).map((tenant) => [tenant, paused.has(tenant)])
}

/** SPEC 14's v4gw_migration_overrides: each configured tenant and how many overrides of it are in force. */
function overridesByTenant(runtime: GatewayRuntime, records: StageOverrideRecords): [string, number][] {
  const counts = new Map(Object.keys(runtime.config.tenants).map((tenant) => [tenant, 0]))
  for (const override of records.list(Date.now())) {
    const count = counts.get(override.tenant)
    if (count !== undefined) counts.set(override.tenant, count + 1)
  }
  return [...counts]
}

/** What of a request's tenant and route the runtime's config no longer has (a reload removed it), if anything. */
function removedBy(runtime: GatewayRuntime, tenant: string, route: string | undefined): 'tenant' | 'route' | undefined {
  const configured = runtime.tenancy.tenants.get(tenant)
  if (configured === undefined) return 'tenant'
  return route === undefined || configured.migration.has(route) ? undefined : 'route'
}

/** A URL as a log line may show it: `?…` for its query. */
function withoutQuery(url: string): string {
  const query = url.indexOf('?')
  return query === -1 ? url : `${url.slice(0, query)}?…`
}
