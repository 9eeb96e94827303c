import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client'
import { MIGRATION_STAGES } from '../config/schema.js'
import { labelHistogram, type HistogramSeries } from './label-histogram.js'
import { CounterCells } from './counter-cells.js'
import type { DeprecationAction, IdempotencyOutcome, LoadShedReason, ServedBy, UpstreamFailure } from './access-record.js'
import type { SessionOutcome, SessionStoreStatus } from './session-events.js'

/**
 * The gateway's Prometheus metrics (SPEC 9), on a registry of its own so that several gateways
 * in one process (tests) never share counters. Every label value is bounded: tenants and
 * routes come from the config (anything else is reported as ""), classes and outcomes are
 * closed sets, and no label ever carries a credential or raw client input.
 */
export interface GatewayMetrics {
  readonly registry: Registry
  observeRequest(sample: RequestSample): void
  /**
   * Removes the request series of tenants and legacy routes a reload removed (SPEC 17), so a
   * dashboard stops showing them; `keep` gets each series' tenant and route label.
   */
  retain(keep: (tenant: string, route: string) => boolean): Promise<void>
  /**
   * SPEC 17's `metrics.statusCodeLabel`, which a reload may change: `v4gw_requests_total` is made
   * again with the other label set (its counts start over, as after a restart).
   */
  setStatusCodeLabel(on: boolean): void
  observeSessionEvent(event: SessionOutcome | 'evicted' | 'capacity-evicted'): void
  observeReload(result: 'success' | 'failure'): void
  /** SPEC 12: a request served without the shared store it would have used. */
  observeStoreUnavailable(feature: 'sessions' | 'registry' | 'idempotency'): void
  /** SPEC 17: finished spans that will not reach the collector: over the export queue's bound, or in a batch the collector did not take. */
  observeSpansDropped(reason: 'queue_full' | 'export_failed' | 'shut_down', count: number): void
  /** SPEC 15: one shadow comparison's outcome (a closed set: match, mismatch, candidate_error, primary_error, dropped, skipped, abandoned). */
  observeShadow(tenant: string, route: string, outcome: string): void
  /** SPEC 17: an upstream call that failed outside a request's own answer (a shadow comparison's V4 side). */
  observeUpstreamFailure(tenant: string, upstream: 'v4' | 'legacy' | 'shadow', cause: string): void
}

export interface RequestSample {
  tenant: string | undefined
  trafficClass: string | undefined
  route: string | undefined
  statusCode: number
  durationMs: number
  upstreamMs: number | undefined
  errorCode: string | undefined
  /** Why the request was shed (SPEC 10), when it was. */
  shedReason?: LoadShedReason | undefined
  /** Why its upstream call failed, when it did (SPEC 17). */
  upstreamFailure?: UpstreamFailure | undefined
  /** SPEC 13's action on a legacy route that has a deprecation. */
  deprecationAction?: DeprecationAction | undefined
  /** SPEC 16's outcome of a request that carried an idempotency key. */
  idempotencyOutcome?: IdempotencyOutcome | undefined
  /** SPEC 14's `x-v4gw-served-by` of a legacy request of a tenant that uses stages. */
  servedBy?: ServedBy | undefined
  /**
   * A reload removed the request's tenant, or its route, while it ran: SPEC 17 removed their
   * series, and this request brings none back (those by tenant too when the tenant went). What is
   * labelled by neither (latency, shedding, credential rejections) is counted as ever.
   */
  removed?: 'tenant' | 'route' | undefined
}



const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx']
const CREDENTIAL_REJECTIONS = new Set(['AUTH_INVALID', 'INVALID_CREDENTIAL_TYPE', 'CREDENTIALS_CONFLICT'])
const LATENCY_BUCKETS_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

/** prom-client's default gauges whose names end in `_total`, which promtool warns on for a gauge. */
const GAUGES_NAMED_AS_COUNTERS = ['active_handles_total', 'active_requests_total', 'active_resources_total'] as const

export function createMetrics(options: {
  sessionEntries: () => number
  /** Requests in flight as `limits.maxInFlight` counts them (SPEC 10, 17 v4gw_requests_in_flight), read at each scrape. */
  requestsInFlight?: () => number
  /** SPEC 17: the exact status as `code` on v4gw_requests_total (default true). */
  statusCodeLabel?: boolean
  /** For v4gw_build_info. */
  version?: string
  sessionStoreStatus?: () => SessionStoreStatus
  /** SPEC 12's v4gw_store_up, with `store.kind: redis` only: whether the shared store answers now. */
  storeUp?: (() => boolean) | undefined
  /** SPEC 12's v4gw_clock_offset_seconds, with `store.kind: redis` only: undefined until measured. */
  clockOffsetSeconds?: (() => number | undefined) | undefined
  /** The running config's hash (config/config-hash.ts), read at each scrape, so a reload shows at once. */
  configHash?: () => string
  processMetrics?: boolean
  /**
   * SPEC 13's v4gw_brownouts_paused, read at each scrape: every configured tenant, with whether a
   * pause (the tenant's or one of its routes') is in force now.
   */
  brownoutsPaused?: () => Iterable<readonly [tenant: string, paused: boolean]>
  /** SPEC 14's v4gw_migration_stage, read at each scrape: every configured legacy route with its effective stage. */
  migrationStages?: () => Iterable<readonly [tenant: string, route: string, stage: string]>
  /** SPEC 14's v4gw_migration_overrides, read at each scrape: every configured tenant with its count of overrides in force. */
  migrationOverrides?: () => Iterable<readonly [tenant: string, count: number]>
  /** Log lines the destination dropped so far (SPEC 10: its reader too far behind), read at each scrape. */
  logLinesDropped?: (() => number) | undefined
}): GatewayMetrics {
  const registry = new Registry()
  if (options.processMetrics !== false) {
    collectDefaultMetrics({ register: registry, prefix: 'v4gw_' })
    // `promtool check metrics` warns on a gauge named like a counter. Each is the sum of the
    // gauge of the same name without `_total` (by type), which stays: sum() gives it back.
    for (const name of GAUGES_NAMED_AS_COUNTERS) registry.removeSingleMetric(`v4gw_nodejs_${name}`)
  }

  /** A counter on this registry: every one of the gateway's counters has labels. */
  const counter = <L extends string>(name: string, help: string, labelNames: readonly L[]): Counter<L> => new Counter({ name, help, labelNames, registers: [registry] })
  /** A counter a request may add to: counted in cells, handed to prom-client when it is read (counter-cells.ts). */
  const countedPerRequest = <L extends string>(name: string, help: string, labelNames: readonly L[]): CountedPerRequest<L> => {
    const cells = new CounterCells(labelNames)
    const counter = new Counter({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        cells.flush(this)
      }
    })
    return { counter, cells }
  }
  // SPEC 10: a log reader that falls behind costs lines, never memory without bound (logger.ts).
  const readDropped = options.logLinesDropped
  if (readDropped !== undefined) {
    let counted = 0
    new Counter({
      name: 'v4gw_log_lines_dropped_total',
      help: 'Log lines dropped because stdout was not read: the gateway holds at most 64 MiB of unwritten lines (SPEC 10)',
      registers: [registry],
      collect() {
        const now = readDropped()
        if (now > counted) this.inc(now - counted)
        counted = now
      }
    })
  }
  /** An unlabelled gauge read at each scrape; none when `read` is undefined (the feature is off). */
  const gaugeAtScrape = (name: string, help: string, read: (() => number) | undefined): void => {
    if (read === undefined) return
    new Gauge({ name, help, registers: [registry], collect() { this.set(read()) } })
  }
  /**
   * A gauge per configured tenant, read at each scrape; reset first, so that a tenant a reload
   * removed goes from the output. None when `read` is undefined.
   */
  const tenantGaugeAtScrape = (name: string, help: string, read: (() => Iterable<readonly [tenant: string, value: number]>) | undefined): void => {
    if (read === undefined) return
    new Gauge({
      name,
      help,
      labelNames: ['tenant'] as const,
      registers: [registry],
      collect() {
        this.reset()
        for (const [tenant, value] of read()) this.set({ tenant }, value)
      }
    })
  }
  const requestsCounter = (withCode: boolean): CountedPerRequest<string> =>
    countedPerRequest(
      'v4gw_requests_total',
      withCode
        ? 'Requests on the traffic listener by tenant, traffic class, legacy route ("native" for native traffic), status class and status code'
        : 'Requests on the traffic listener by tenant, traffic class, legacy route ("native" for native traffic) and status class',
      withCode ? (['tenant', 'class', 'route', 'status_class', 'code'] as const) : (['tenant', 'class', 'route', 'status_class'] as const)
    )
  let statusCodeLabel = options.statusCodeLabel !== false
  let requests = requestsCounter(statusCodeLabel)
  gaugeAtScrape('v4gw_requests_in_flight', 'Requests in flight as limits.maxInFlight counts them: admitted and not ended, a keyed call whose client left included, an event-loop shed until its 503 is written', options.requestsInFlight)
  const loadShed = counter(
    'v4gw_load_shed_total',
    'Requests answered 503 OVERLOADED before any work (SPEC 10), by reason: in_flight (limits.maxInFlight), event_loop (limits.maxEventLoopDelayMs)',
    ['reason'] as const
  )
  const upstreamFailures = counter(
    'v4gw_upstream_failures_total',
    'Upstream calls that failed, by tenant, upstream (v4, legacy, shadow) and cause (refused, reset, timeout, bad_response, dns)',
    ['tenant', 'upstream', 'cause'] as const
  )
  new Gauge({
    name: 'v4gw_build_info',
    help: 'The running build: 1, labelled with the gateway version and the Node.js version',
    labelNames: ['version', 'node_version'] as const,
    registers: [registry]
  }).set({ version: options.version ?? 'unknown', node_version: process.versions.node }, 1)
  /** A latency histogram by traffic class, in seconds (Prometheus base unit), counted by the gateway (label-histogram.ts). */
  const latencyByClass = (name: string, help: string): ((trafficClass: string) => HistogramSeries) =>
    labelHistogram({ name, help, label: 'class', buckets: LATENCY_BUCKETS_SECONDS, registry })
  const requestSeconds = latencyByClass('v4gw_request_duration_seconds', 'Time from request start to response, by traffic class')
  const upstreamSeconds = latencyByClass(
    'v4gw_upstream_duration_seconds',
    'Time spent on the upstream per request, by traffic class: a translated legacy call until its V4 answers are read, streamed traffic until the upstream response headers'
  )
  const sessionEvents = countedPerRequest(
    'v4gw_session_map_events_total',
    'Session-map outcomes: hit, miss, coalesced, stale-retry; evicted (stale or 401), capacity-evicted (pushed out at sessions.maxEntries)',
    ['event'] as const
  )
  gaugeAtScrape('v4gw_session_map_entries', 'Entries in the session map', options.sessionEntries)
  const storeStatus = options.sessionStoreStatus
  // Only a shared store has a reachability to report (docs/scaling.md, "When Redis is unreachable").
  gaugeAtScrape(
    'v4gw_session_store_redis_up',
    '1 while the shared session store (Redis/Valkey) is reachable, 0 while this replica serves with its own map',
    storeStatus?.().redis === undefined ? undefined : () => (storeStatus().redis === 'up' ? 1 : 0)
  )
  const { storeUp, clockOffsetSeconds } = options
  gaugeAtScrape('v4gw_store_up', '1 while the shared store (SPEC 12: Redis/Valkey) answers, 0 while this replica serves from its own memory', storeUp && (() => (storeUp() ? 1 : 0)))
  gaugeAtScrape(
    'v4gw_clock_offset_seconds',
    "How far this replica's clock is ahead of the shared store's TIME (negative: behind), measured when the store comes up and once a minute",
    // 0 until the first measurement, which is taken as soon as the store answers.
    clockOffsetSeconds && (() => clockOffsetSeconds() ?? 0)
  )
  const storeUnavailable = counter(
    'v4gw_store_unavailable_total',
    'Requests served without the shared store they would have used (SPEC 12), by feature: sessions (a session-map miss), registry, idempotency',
    ['feature'] as const
  )
  const configHash = options.configHash
  if (configHash !== undefined) {
    // SPEC 17: an info metric, one series at 1 whose label says which config runs on this replica.
    new Gauge({
      name: 'v4gw_config_info',
      help: 'The running config: 1, labelled with its hash (also in /readyz)',
      labelNames: ['hash'] as const,
      registers: [registry],
      collect() {
        this.reset()
        this.set({ hash: configHash() }, 1)
      }
    })
  }
  const credentialRejections = counter(
    'v4gw_credential_rejections_total',
    'Requests refused for their credentials, by error code',
    ['reason'] as const
  )
  const deprecationActions = countedPerRequest(
    'v4gw_legacy_deprecation_total',
    'Requests to deprecated legacy routes (SPEC 13) by tenant, route and action: header (served, with the deprecation headers; a paused brownout too), brownout (410 LEGACY_BROWNOUT), gone (410 LEGACY_GONE), exempt (spared by an exemption)',
    ['tenant', 'route', 'action'] as const
  )
  const idempotencyOutcomes = countedPerRequest(
    'v4gw_idempotency_total',
    'Legacy requests that carried an idempotency key (SPEC 16) by tenant, route and outcome: executed, replayed, waited (replayed after waiting for the first call), in_progress (409), key_reused (422), too_large (409), not_kept (ran, answer not kept), store_unavailable',
    ['tenant', 'route', 'outcome'] as const
  )
  tenantGaugeAtScrape(
    'v4gw_migration_overrides',
    'Stage overrides (PUT /admin/migration/stage) in force for the tenant, tenant-wide and per route, suspended ones included',
    options.migrationOverrides
  )
  const shadowComparisons = counter(
    'v4gw_shadow_comparisons_total',
    'Shadow comparisons of the V4 translation with the legacy answer (SPEC 15) by tenant, route and outcome: match, mismatch, candidate_error (no answer from V4), primary_error (none from the legacy side), dropped (a cap), skipped (not eligible), abandoned (cut at shutdown)',
    ['tenant', 'route', 'outcome'] as const
  )
  const brownoutsPaused = options.brownoutsPaused
  tenantGaugeAtScrape(
    'v4gw_brownouts_paused',
    '1 while a brownout pause (POST /admin/brownouts/pause) is in force on this replica for the tenant or one of its routes, else 0',
    brownoutsPaused && (() => Array.from(brownoutsPaused(), ([tenant, paused]) => [tenant, paused ? 1 : 0] as const))
  )
  const legacyRequests = countedPerRequest(
    'v4gw_legacy_requests_total',
    'Legacy-route requests of tenants that use stages (SPEC 14) by tenant, route and served_by: legacy (upstream.legacy), v4 (the translation), gateway (an answer the gateway made itself)',
    ['tenant', 'route', 'served_by'] as const
  )
  const migrationStages = options.migrationStages
  if (migrationStages !== undefined) {
    new Gauge({
      name: 'v4gw_migration_stage',
      help: "SPEC 14's effective stage of each legacy route: one series per stage, 1 for the route's (config or override), 0 for the others",
      labelNames: ['tenant', 'route', 'stage'] as const,
      registers: [registry],
      collect() {
        // Reset first: a route or tenant a reload removed goes from the output.
        this.reset()
        for (const [tenant, route, effective] of migrationStages()) {
          for (const stage of MIGRATION_STAGES) this.set({ tenant, route, stage }, stage === effective ? 1 : 0)
        }
      }
    })
  }
  const reloads = counter('v4gw_config_reloads_total', 'Config reloads by result', ['result'] as const)
  const spansDropped = counter(
    'v4gw_trace_spans_dropped_total',
    'Finished spans not exported (SPEC 17), by reason: queue_full (over tracing.maxQueueSpans while the collector is slow or away), export_failed (a batch the collector refused or never answered), shut_down (ended after the last export at shutdown began)',
    ['reason'] as const
  )

  let series: (string | number)[] = statusCodeLabel ? ['', '', '', '', 0] : ['', '', '', '']
  const sessionEvent: string[] = ['']
  return {
    registry,
    observeRequest(sample) {
      const trafficClass = sample.trafficClass ?? 'unknown'
      const tenant = sample.tenant ?? ''
      const route = sample.route ?? (trafficClass === 'native' ? 'native' : '')
      const statusClass = STATUS_CLASSES[Math.floor(sample.statusCode / 100)] ?? 'other'
      // One array filled per request rather than made per request (CounterCells.add keeps none of it).
      series[0] = tenant
      series[1] = trafficClass
      series[2] = route
      series[3] = statusClass
      if (statusCodeLabel) series[4] = sample.statusCode
      const removed = sample.removed
      if (removed === undefined) requests.cells.add(series)
      if (sample.shedReason !== undefined) loadShed.inc({ reason: sample.shedReason })
      if (sample.upstreamFailure !== undefined && removed !== 'tenant') upstreamFailures.inc({ tenant, upstream: sample.upstreamFailure.upstream, cause: sample.upstreamFailure.cause })
      requestSeconds(trafficClass).observe(sample.durationMs / 1000)
      if (sample.upstreamMs !== undefined) upstreamSeconds(trafficClass).observe(sample.upstreamMs / 1000)
      if (sample.errorCode !== undefined && CREDENTIAL_REJECTIONS.has(sample.errorCode)) credentialRejections.inc({ reason: sample.errorCode })
      if (removed !== undefined) return
      if (sample.deprecationAction !== undefined) deprecationActions.cells.add([tenant, route, sample.deprecationAction])
      if (sample.idempotencyOutcome !== undefined) idempotencyOutcomes.cells.add([tenant, route, sample.idempotencyOutcome])
      if (sample.servedBy !== undefined) legacyRequests.cells.add([tenant, route, sample.servedBy])
    },
    setStatusCodeLabel(on) {
      if (on === statusCodeLabel) return
      registry.removeSingleMetric('v4gw_requests_total')
      statusCodeLabel = on
      requests = requestsCounter(on)
      series = on ? ['', '', '', '', 0] : ['', '', '', '']
    },
    async retain(keep) {
      await Promise.all([
        removeCountedNotKept(requests, keep),
        removeCountedNotKept(deprecationActions, keep),
        removeCountedNotKept(idempotencyOutcomes, keep),
        removeCountedNotKept(legacyRequests, keep),
        removeSeriesNotKept(shadowComparisons, keep),
        // By tenant only: `keep` reads an empty route as the tenant's own.
        removeSeriesNotKept(upstreamFailures, keep)
      ])
    },
    observeSessionEvent(event) {
      // Once per session-execute request: counted in cells, as the requests counter is, with its one array.
      sessionEvent[0] = event
      sessionEvents.cells.add(sessionEvent)
    },
    observeReload(result) {
      reloads.inc({ result })
    },
    observeStoreUnavailable(feature) {
      storeUnavailable.inc({ feature })
    },
    observeSpansDropped(reason, count) {
      spansDropped.inc({ reason }, count)
    },
    observeShadow(tenant, route, outcome) {
      shadowComparisons.inc({ tenant, route, outcome })
    },
    observeUpstreamFailure(tenant, upstream, cause) {
      upstreamFailures.inc({ tenant, upstream, cause })
    }
  }
}

/** A counter that requests add to (SPEC 17), with the cells that count for it between reads. */
interface CountedPerRequest<L extends string> {
  readonly counter: Counter<L>
  readonly cells: CounterCells<L>
}

/** removeSeriesNotKept for a counter counted in cells: the cells of a removed series go too. */
async function removeCountedNotKept<L extends string>({ counter, cells }: CountedPerRequest<L>, keep: (tenant: string, route: string) => boolean): Promise<void> {
  // Reading the counter flushes the cells first (its collect), so nothing counted is lost.
  await removeSeriesNotKept(counter as Counter<string>, keep)
  cells.retain((labels) => seriesKept(labels, keep))
}

/**
 * Removes the series of `counter` whose tenant and route `keep` refuses (a reload removed them,
 * SPEC 17). A series without a tenant (a request refused before one was known) always stays.
 */
async function removeSeriesNotKept(counter: Counter<string>, keep: (tenant: string, route: string) => boolean): Promise<void> {
  for (const { labels } of (await counter.get()).values) {
    if (!seriesKept(labels, keep)) counter.remove(labels as Record<string, string>)
  }
}

/** Whether a reload keeps a series: one without a tenant always, else as `keep` says of its tenant and route. */
function seriesKept(labels: Readonly<Partial<Record<string, string | number>>>, keep: (tenant: string, route: string) => boolean): boolean {
  const tenant = String(labels.tenant ?? '')
  return tenant === '' || keep(tenant, String(labels.route ?? ''))
}
