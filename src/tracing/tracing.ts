import { ROOT_CONTEXT, trace, TraceFlags, type Link, type SpanContext } from '@opentelemetry/api'
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core'
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  type SpanProcessor
} from '@opentelemetry/sdk-trace-base'
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions'
import type { IncomingHttpHeaders } from 'node:http'
import type { Logger } from 'pino'
import type { GatewayConfig } from '../config/schema.js'
import type { SpanRecorder } from './ended-span.js'
import { encodingAhead } from './encode-ahead.js'
import { createSpanEncoder } from './otlp-protobuf.js'
import { RecordedRequestSpan, UnrecordedRequestSpan, type RequestSpan } from './request-span.js'
import { createThreadExporter, type ExportThreadSettings } from './thread-exporter.js'
import { ratioBound, TraceIds } from './trace-ids.js'

/**
 * Why spans went unexported: SPEC 17's `v4gw_trace_spans_dropped_total{reason}`. `shut_down`: a
 * span that ended after the queue's last export began (a keyed call that outlived its client, SPEC 16).
 */
export type SpanDropReason = 'queue_full' | 'export_failed' | 'shut_down'

/** The keys of `tracing` read per request: they reload (SPEC 17). */
export interface TracingRequestSettings {
  readonly sampleRatio: number
  readonly trustIncoming: boolean
}

/** What a SERVER span starts from: the request as it arrived. */
export interface ServerSpanStart {
  readonly method: string
  /** `performance.now()` at arrival: the span starts there, whenever it is made. */
  readonly startedAt: number
  readonly headers: IncomingHttpHeaders
}

export interface TracingDeps {
  /** Built from the config the gateway started with: the restart-only keys. */
  config: GatewayConfig['tracing']
  /** The gateway's version, for the resource's `service.version`. */
  version: string
  logger: Logger
  /** Spans that will not reach the collector, and why (SPEC 17). */
  onSpansDropped: (reason: SpanDropReason, count: number) => void
}

/**
 * SPEC 17's OpenTelemetry tracing: spans placed by hand at the gateway's own seams (no
 * auto-instrumentation of http, undici or fastify), exported in batches off the request path.
 * Exists only when `tracing.enabled`: with tracing off nothing of this is built, and the traffic
 * listener makes no span object (traffic/traffic-handler.ts chooses its functions once).
 *
 * The spans are recorded by the gateway itself (ended-span.ts) and handed to the SDK's batch
 * processor and OTLP exporter; no tracer provider is made. Nothing is registered globally (no
 * tracer provider, propagator or context manager), so two gateways in one process (the tests)
 * never share spans, and nothing else in the process (a library that traces) joins the gateway's
 * traces.
 */
export interface Tracing {
  /** The SERVER span of one request on the traffic listener (SPEC 17), with its W3C parent or link. */
  startRequest(start: ServerSpanStart, settings: TracingRequestSettings, queryCredential: string | null): RequestSpan
  /** Exports what is queued and stops; resolves when the last batch is answered or failed. */
  shutdown(): Promise<void>
  /** The grace period ended first: what is still queued or being sent is dropped, and nothing of tracing keeps the process alive. */
  abandon(): void
}

/**
 * Spans per OTLP/HTTP export, at most: twice the SDK's default (512). An export has a fixed price
 * (the HTTP call, the exporter's bookkeeping, run too seldom to be compiled) that fewer, larger
 * batches share: tracing every request cost 1.6 % less CPU per request (docs/performance.md). A
 * gateway span is about 400 bytes, so a batch is about 400 KiB, and under 10 MiB even with every
 * attribute at its 1,024-character limit: below the OpenTelemetry Collector's default request
 * limit (20 MiB).
 */
const MAX_EXPORT_BATCH_SPANS = 1024
/** One export (request and answer, retries included) may take this long; the queue fills meanwhile. */
const EXPORT_TIMEOUT_MS = 10_000

export function createTracing(deps: TracingDeps): Tracing {
  const { config } = deps
  const settings: ExportThreadSettings = { url: config.endpoint, headers: { ...config.headers }, timeoutMillis: EXPORT_TIMEOUT_MS, protocol: config.protocol }
  const onThreadStopped = (code: string | undefined): void => deps.logger.warn({ code }, 'trace export thread stopped: its batches are dropped until it runs again')
  // OTLP/HTTP in protobuf with the gateway's own span encoder in place of the library's serializer
  // (otlp-protobuf.ts: the same bytes, measured cheaper; docs/performance.md), which writes each
  // batch a step at a time (encode-ahead.ts); JSON with the library's. The thread sends them.
  const encoding = config.protocol === 'http/json' ? undefined : encodingAhead(createSpanEncoder())
  const thread = createThreadExporter(settings, encoding?.serialize ?? ((spans) => JsonTraceSerializer.serializeRequest(spans) ?? undefined), onThreadStopped)
  const otlp: SpanExporter = encoding === undefined ? thread : encoding.exporter(thread)
  const queue = new BoundedQueue(config.maxQueueSpans, deps.onSpansDropped)
  const exporter = new ReportingExporter(otlp, queue, deps.logger)
  queue.processor = new BatchSpanProcessor(exporter, {
    maxQueueSize: config.maxQueueSpans,
    maxExportBatchSize: Math.min(MAX_EXPORT_BATCH_SPANS, config.maxQueueSpans),
    scheduledDelayMillis: config.batchDelayMs,
    exportTimeoutMillis: EXPORT_TIMEOUT_MS
  })
  const ids = new TraceIds()
  const recorder: SpanRecorder = {
    // Only what the config says: no detectors (host, process, OTEL_RESOURCE_ATTRIBUTES), so nothing
    // of the environment or the command line reaches an exported byte.
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName, [ATTR_SERVICE_VERSION]: deps.version }),
    scope: { name: 'v4-migration-gateway', version: deps.version },
    newSpanId: ids.keptSpanId,
    record: (span) => queue.onEnd(span)
  }
  // Made once: what every request's span is made with.
  const make: SpanMaking = { recorder, propagator: new W3CTraceContextPropagator(), ids }

  return {
    startRequest(start, settings, queryCredential) {
      // `sampleRatio` reloads (SPEC 17): its bound is read per request.
      return startServerSpan(make, start, settings.trustIncoming, ratioBound(settings.sampleRatio), queryCredential)
    },
    // The SDK's processor stops the exporter only when every batch of its last flush went out: one
    // the collector refused would leave the thread unstopped, and the batches still being sent
    // unwaited for. The exporter's shutdown waits for them, whatever the flush came to.
    shutdown: () => queue.shutdown().then(
      () => exporter.shutdown(),
      () => exporter.shutdown()
    ),
    abandon: () => thread.abandon()
  }
}

/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the client's valid `traceparent` is
 * the SERVER span's parent only when trusted; otherwise the request starts a new trace, sampled
 * by the gateway's own ratio whatever the client's flag says, and the client's context is a
 * link (a client can neither force sampling nor graft the gateway's spans onto a trace of its
 * choosing; docs/decisions.md).
 */
function startServerSpan(make: SpanMaking, start: ServerSpanStart, trustIncoming: boolean, sampleBound: number, queryCredential: string | null): RequestSpan {
  let parent: SpanContext | undefined
  let links: Link[] | undefined
  if (start.headers.traceparent !== undefined) {
    const extracted = trace.getSpanContext(make.propagator.extract(ROOT_CONTEXT, start.headers, HEADER_GETTER))
    if (extracted !== undefined && trace.isSpanContextValid(extracted)) {
      // Without its tracestate: that is the client's and may hold anything, so it is never
      // recorded (a span, a link and their children would carry it into the export). It still
      // travels to the upstream in its own header, unchanged.
      const remote: SpanContext = { traceId: extracted.traceId, spanId: extracted.spanId, traceFlags: extracted.traceFlags, isRemote: true }
      if (trustIncoming) parent = remote
      else links = [{ context: remote }]
    }
  }
  // The decision the SDK's ParentBasedSampler would make: a trusted parent's sampled flag (its
  // defaults for a remote parent), else TraceIdRatioBased on a new trace id (trace-ids.ts).
  // An unsampled request costs no span objects.
  let traceId: string
  let sampled: boolean
  if (parent === undefined) ({ traceId, sampled } = make.ids.root(sampleBound))
  else {
    traceId = parent.traceId
    sampled = (parent.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED
  }
  if (!sampled) return new UnrecordedRequestSpan(traceId, make.ids.spanId(), make.ids.spanId)
  return new RecordedRequestSpan(make.recorder, traceId, parent, links, start.method, start.startedAt, queryCredential)
}

interface SpanMaking {
  recorder: SpanRecorder
  propagator: W3CTraceContextPropagator
  ids: TraceIds
}

/** Node's joined view of the headers: one string per field (two `traceparent` fields are "a, b", which is invalid). */
const HEADER_GETTER = {
  get: (carrier: IncomingHttpHeaders, key: string) => carrier[key],
  keys: (carrier: IncomingHttpHeaders) => Object.keys(carrier)
}

/**
 * The SDK's batch processor behind a bound of our own, so that every span over it is counted
 * (SPEC 17: dropped and counted), not only logged by the SDK's diag channel: a sampled span is
 * admitted while fewer than `maxSpans` wait, and leaves the count when its batch goes to the
 * exporter (ReportingExporter). The inner processor has the same bound, so it never drops itself.
 */
class BoundedQueue {
  processor: SpanProcessor | undefined
  waiting = 0
  /** The last export has begun: the SDK's processor takes no span after it, silently. */
  closed = false

  constructor(
    private readonly maxSpans: number,
    readonly onDropped: TracingDeps['onSpansDropped']
  ) {}

  /** An ended span of a sampled request (request-span.ts records no other). */
  onEnd(span: ReadableSpan): void {
    if (this.closed) {
      this.onDropped('shut_down', 1)
      return
    }
    if (this.waiting >= this.maxSpans) {
      this.onDropped('queue_full', 1)
      return
    }
    this.waiting++
    this.processor?.onEnd(span)
  }

  /** Exports what waits, then stops the exporter. */
  shutdown(): Promise<void> {
    this.closed = true
    return this.processor?.shutdown() ?? Promise.resolve()
  }
}

/**
 * The OTLP exporter, counting each batch out of the queue as it leaves and its spans as dropped
 * when the collector did not take them (down, refusing, too slow). Logs once when exports start
 * failing and once when they work again, never what the collector said (it may echo a header).
 */
class ReportingExporter implements SpanExporter {
  private failing = false

  constructor(
    private readonly otlp: SpanExporter,
    private readonly queue: BoundedQueue,
    private readonly logger: Logger
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.queue.waiting = Math.max(0, this.queue.waiting - spans.length)
    this.otlp.export(spans, (result) => {
      const failed = result.code !== ExportResultCode.SUCCESS
      if (failed) this.queue.onDropped('export_failed', spans.length)
      if (failed !== this.failing) {
        this.failing = failed
        if (failed) this.logger.warn({ spans: spans.length }, 'trace export failed: spans are dropped until the collector answers (v4gw_trace_spans_dropped_total)')
        else this.logger.info('trace export works again')
      }
      done(result)
    })
  }

  forceFlush(): Promise<void> {
    return this.otlp.forceFlush?.() ?? Promise.resolve()
  }

  shutdown(): Promise<void> {
    return this.otlp.shutdown()
  }
}
