import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
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
  observeSessionEvent(event: SessionOutcome | 'evicted' | 'capacity-evicted'): void
  observeReload(result: 'success' | 'failure'): void
}

export interface RequestSample {
  tenant: string | undefined
  trafficClass: string | undefined
  route: string | undefined
  statusCode: number
  durationMs: number
  upstreamMs: number | undefined
  errorCode: string | undefined
}

const STATUS_CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx']
const CREDENTIAL_REJECTIONS = new Set(['AUTH_INVALID', 'INVALID_CREDENTIAL_TYPE', 'CREDENTIALS_CONFLICT'])
const LATENCY_BUCKETS_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

export function createMetrics(options: {
  sessionEntries: () => number
  sessionStoreStatus?: () => SessionStoreStatus
  /** The running config's hash (config/config-hash.ts), read at each scrape, so a reload shows at once. */
  configHash?: () => string
  processMetrics?: boolean
}): GatewayMetrics {
  const registry = new Registry()
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry, prefix: 'v4gw_' })

  const requests = new Counter({
    name: 'v4gw_requests_total',
    help: 'Requests on the traffic listener by tenant, traffic class, legacy route and status class',
    labelNames: ['tenant', 'class', 'route', 'status_class'] as const,
    registers: [registry]
  })
  /** A latency histogram by traffic class, in seconds (Prometheus base unit). */
  const latencyByClass = (name: string, help: string): Histogram<'class'> =>
    new Histogram({ name, help, labelNames: ['class'] as const, buckets: LATENCY_BUCKETS_SECONDS, registers: [registry] })
  const requestSeconds = latencyByClass('v4gw_request_duration_seconds', 'Time from request start to response, by traffic class')
  const upstreamSeconds = latencyByClass(
    'v4gw_upstream_duration_seconds',
    'Time spent on the upstream per request, by traffic class: a translated legacy call until its V4 answers are read, streamed traffic until the upstream response headers'
  )
  const sessionEvents = new Counter({
    name: 'v4gw_session_map_events_total',
    help: 'Session-map outcomes: hit, miss, coalesced, stale-retry; evicted (stale or 401), capacity-evicted (pushed out at sessions.maxEntries)',
    labelNames: ['event'] as const,
    registers: [registry]
  })
  new Gauge({
    name: 'v4gw_session_map_entries',
    help: 'Entries in the session map',
    registers: [registry],
    collect() {
      this.set(options.sessionEntries())
    }
  })
  const storeStatus = options.sessionStoreStatus
  // Only a shared store has a reachability to report (docs/scaling.md, "When Redis is unreachable").
  if (storeStatus?.().redis !== undefined) {
    new Gauge({
      name: 'v4gw_session_store_redis_up',
      help: '1 while the shared session store (Redis/Valkey) is reachable, 0 while this replica serves with its own map',
      registers: [registry],
      collect() {
        this.set(storeStatus().redis === 'up' ? 1 : 0)
      }
    })
  }
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
  const credentialRejections = new Counter({
    name: 'v4gw_credential_rejections_total',
    help: 'Requests refused for their credentials, by error code',
    labelNames: ['reason'] as const,
    registers: [registry]
  })
  const reloads = new Counter({
    name: 'v4gw_config_reloads_total',
    help: 'Config reloads by result',
    labelNames: ['result'] as const,
    registers: [registry]
  })

  return {
    registry,
    observeRequest(sample) {
      const trafficClass = sample.trafficClass ?? 'unknown'
      const tenant = sample.tenant ?? ''
      const route = sample.route ?? ''
      const statusClass = STATUS_CLASSES[Math.floor(sample.statusCode / 100)] ?? 'other'
      requests.inc({ tenant, class: trafficClass, route, status_class: statusClass })
      requestSeconds.observe({ class: trafficClass }, sample.durationMs / 1000)
      if (sample.upstreamMs !== undefined) upstreamSeconds.observe({ class: trafficClass }, sample.upstreamMs / 1000)
      if (sample.errorCode !== undefined && CREDENTIAL_REJECTIONS.has(sample.errorCode)) credentialRejections.inc({ reason: sample.errorCode })
    },
    observeSessionEvent(event) {
      sessionEvents.inc({ event })
    },
    observeReload(result) {
      reloads.inc({ result })
    }
  }
}
