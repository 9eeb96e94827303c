import { createRequire } from 'node:module'
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Attributes, type Link, type SpanContext } from '@opentelemetry/api'
import { hrTimeToMilliseconds } from '@opentelemetry/core'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { AlwaysOnSampler, BasicTracerProvider, InMemorySpanExporter, RandomIdGenerator, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { describe, expect, it } from 'vitest'
import type { SpanRecorder } from '../../../src/tracing/ended-span.js'
import { RecordedRequestSpan, type CallNames, type ServerSpanFacts } from '../../../src/tracing/request-span.js'
import type { UpstreamRequest } from '../../../src/upstream/upstream-client.js'

/*
 * The gateway records its spans itself (tracing/ended-span.ts) instead of through the SDK's
 * tracer, for speed (docs/performance.md). Held here to the SDK: each recorded span is made again
 * by the SDK's own tracer from the same inputs, with the span limits the gateway gave it, and the
 * two must come out of the exporters' serializers (OTLP protobuf and JSON, the ones the
 * exporters the gateway uses load) as the same bytes.
 */

interface TraceSerializer {
  serializeRequest(spans: ReadableSpan[]): Uint8Array | undefined
}

function serializersOf(exporterPackage: string): { ProtobufTraceSerializer: TraceSerializer; JsonTraceSerializer: TraceSerializer } {
  const exporterRequire = createRequire(createRequire(import.meta.url).resolve(exporterPackage))
  return exporterRequire('@opentelemetry/otlp-transformer') as { ProtobufTraceSerializer: TraceSerializer; JsonTraceSerializer: TraceSerializer }
}

const PROTOBUF = serializersOf('@opentelemetry/exporter-trace-otlp-proto').ProtobufTraceSerializer
const JSON_ENCODING = serializersOf('@opentelemetry/exporter-trace-otlp-http').JsonTraceSerializer

const RESOURCE = resourceFromAttributes({ 'service.name': 'contract', 'service.version': '1.2.3' })
const SCOPE = { name: 'v4-migration-gateway', version: '1.2.3' }
/** What tracing.ts gave the SDK's provider before the gateway recorded its spans itself. */
const FORMER_SPAN_LIMITS = { attributeCountLimit: 64, attributeValueLengthLimit: 1024, eventCountLimit: 16, linkCountLimit: 4, attributePerEventCountLimit: 16, attributePerLinkCountLimit: 16 }

function recorder(): SpanRecorder & { spans: ReadableSpan[] } {
  const spans: ReadableSpan[] = []
  return { resource: RESOURCE, scope: SCOPE, newSpanId: new RandomIdGenerator().generateSpanId, record: (span) => spans.push(span), spans }
}

/** What the test script made a span to be, given to the SDK as the gateway's former code gave it. */
interface Expected {
  name: string
  kind: SpanKind
  /** The parent's context as the SDK's tracer had it: a trusted client's (remote), or the request span's. */
  parent: SpanContext | undefined
  links: Link[] | undefined
  error: boolean
  /** The attributes as handed to the SDK (uncut). */
  attributes: Attributes
}

/**
 * The span the SDK's tracer makes of `expected`: only its ids and times are taken from the
 * gateway's span (a test cannot script performance.now(); the times are checked apart).
 */
function sdkTwin(ours: ReadableSpan, expected: Expected): ReadableSpan {
  const exporter = new InMemorySpanExporter()
  const { traceId, spanId } = ours.spanContext()
  const provider = new BasicTracerProvider({
    resource: RESOURCE,
    sampler: new AlwaysOnSampler(),
    idGenerator: { generateTraceId: () => traceId, generateSpanId: () => spanId },
    spanProcessors: [new SimpleSpanProcessor(exporter)],
    spanLimits: FORMER_SPAN_LIMITS
  })
  const parent = expected.parent
  const context = parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, parent)
  const span = provider.getTracer(SCOPE.name, SCOPE.version).startSpan(expected.name, { kind: expected.kind, startTime: ours.startTime, links: expected.links, root: parent === undefined }, context)
  span.setAttributes(expected.attributes)
  if (expected.error) span.setStatus({ code: SpanStatusCode.ERROR })
  span.end(ours.endTime)
  const [twin] = exporter.getFinishedSpans()
  if (twin === undefined) throw new Error('the SDK recorded no span')
  return twin
}

function expectSameBytes(ours: ReadableSpan[], twins: ReadableSpan[]): void {
  expect(twins.map((span) => [span.resource.attributes, span.instrumentationScope])).toEqual(ours.map((span) => [span.resource.attributes, span.instrumentationScope]))
  // The serializers group spans by their resource and scope objects: each twin's provider has its own.
  const regrouped = twins.map((twin) => Object.assign(Object.create(Object.getPrototypeOf(twin) as object) as ReadableSpan, twin, { resource: RESOURCE, instrumentationScope: SCOPE }))
  for (const serializer of [PROTOBUF, JSON_ENCODING]) {
    const expected = serializer.serializeRequest(regrouped)
    expect(expected?.byteLength).toBeGreaterThan(100)
    expect(Buffer.from(serializer.serializeRequest(ours) as Uint8Array).toString('hex')).toBe(Buffer.from(expected as Uint8Array).toString('hex'))
  }
}

const LONG_PATH = `/v1/headless/runs/${'a'.repeat(3_000)}`

const FACTS: ServerSpanFacts = {
  name: 'POST /v1/headless/runs',
  route: '/v1/headless/runs',
  statusCode: 502,
  failed: true,
  errorCode: 'UPSTREAM_UNAVAILABLE',
  scheme: 'http',
  path: LONG_PATH,
  rawQuery: 'page=2&access_token=secret-value',
  httpVersion: '1.1',
  serverAddress: 'gateway.internal',
  serverPort: 8080,
  clientAddress: '10.0.0.7',
  userAgent: 'legacy-client/1.0',
  tenant: 'acme',
  trafficClass: 'legacy',
  legacyRoute: 'POST /v1/headless/runs',
  sessionOutcome: 'created',
  credentialType: 'session',
  migrationStage: 'translate',
  servedBy: 'v4',
  deprecationAction: 'header',
  idempotencyOutcome: undefined
}

const NAMES: CallNames = { buffered: () => ({ name: 'POST /v4/sessions.start' }), streamed: () => 'POST /v4/*', queryCredential: 'access_token', shadow: false }

function call(path: string): UpstreamRequest {
  return { origin: 'http://127.0.0.1:9000', method: 'POST', path, headers: {}, body: null, timeoutMs: 1_000 }
}

describe('the spans the gateway records, against the SDK making the same spans', () => {
  it('a new root with a link, an error answer, a failed call and a long path serialise to the same bytes', () => {
    const spans = recorder()
    const link: SpanContext = { traceId: 'c'.repeat(32), spanId: 'd'.repeat(16), traceFlags: TraceFlags.SAMPLED, isRemote: true }
    const request = new RecordedRequestSpan(spans, 'a'.repeat(31) + '1', undefined, [{ context: link }], 'POST', performance.now(), 'access_token')
    const calls = request.callTracer(() => NAMES)
    const answered = calls.traceCall(call('/v4/sessions.start?access_token=secret-value&x=1'), false)
    answered.answered(503)
    answered.end(performance.now())
    const failed = calls.traceCall(call('/v4/execute'), true)
    failed.failed('UPSTREAM_TIMEOUT', performance.now())
    // A streamed call still open when its request ends is ended with it.
    calls.traceCall(call(`/v4/files${'/x'.repeat(800)}`), true).answered(200)
    request.end(FACTS, performance.now())

    expect(spans.spans.map((span) => span.name)).toEqual(['POST /v4/sessions.start', 'POST /v4/*', 'POST /v4/*', 'POST /v1/headless/runs'])
    const server = spans.spans[3] as ReadableSpan
    // The SDK was given the path uncut: it cuts it at the limit as the gateway does.
    expect(String(server.attributes['url.path']).length).toBe(1024)
    // The request span as the SDK's tracer had it: a local parent, no isRemote.
    const requestContext: SpanContext = { traceId: request.traceId, spanId: request.spanId, traceFlags: TraceFlags.SAMPLED }
    const client = (name: string, error: boolean, span: ReadableSpan | undefined): Expected => ({ name, kind: SpanKind.CLIENT, parent: requestContext, links: undefined, error, attributes: span?.attributes ?? {} })
    const [started, failedCall, streamed] = spans.spans
    const expected: Expected[] = [
      client('POST /v4/sessions.start', true, started),
      client('POST /v4/*', true, failedCall),
      client('POST /v4/*', false, streamed),
      { name: 'POST /v1/headless/runs', kind: SpanKind.SERVER, parent: undefined, links: [{ context: link }], error: true, attributes: { ...server.attributes, 'url.path': LONG_PATH } }
    ]
    const twins = spans.spans.map((span, index) => sdkTwin(span, expected[index] as Expected))
    expectSameBytes(spans.spans, twins)
  })

  it('ignores what a call hears after its span ended, and records a call started after its request ended under the request', () => {
    const spans = recorder()
    const request = new RecordedRequestSpan(spans, '1'.repeat(32), undefined, undefined, 'POST', performance.now(), 'access_token')
    const calls = request.callTracer(() => NAMES)
    const answered = calls.traceCall(call('/v4/sessions.start'), false)
    answered.answered(200)
    answered.end(performance.now())
    answered.answered(503)
    answered.failed('UPSTREAM_TIMEOUT', performance.now())
    request.end(undefined, performance.now())
    // A shadow comparison's call may start once the request has been answered (SPEC 15).
    const late = calls.traceCall(call('/v4/execute'), false)
    late.answered(200)
    late.end(performance.now())
    const [first, server, second] = spans.spans as [ReadableSpan, ReadableSpan, ReadableSpan]
    expect(spans.spans.map((span) => span.kind)).toEqual([SpanKind.CLIENT, SpanKind.SERVER, SpanKind.CLIENT])
    expect(first.attributes['http.response.status_code']).toBe(200)
    expect(first.attributes['error.type']).toBeUndefined()
    expect(first.status.code).toBe(SpanStatusCode.UNSET)
    for (const client of [first, second]) {
      expect(client.parentSpanContext).toEqual({ traceId: '1'.repeat(32), spanId: server.spanContext().spanId, traceFlags: TraceFlags.SAMPLED })
      expect(client.spanContext().traceId).toBe('1'.repeat(32))
    }
    // CLIENT times lie within the request's (the late one after it) and are not before their start.
    expect(hrTimeToMilliseconds(first.startTime)).toBeGreaterThanOrEqual(hrTimeToMilliseconds(server.startTime))
    expect(hrTimeToMilliseconds(first.endTime)).toBeLessThanOrEqual(hrTimeToMilliseconds(server.endTime))
    expect(hrTimeToMilliseconds(second.startTime)).toBeGreaterThanOrEqual(hrTimeToMilliseconds(server.endTime))
    expect(hrTimeToMilliseconds(second.endTime)).toBeGreaterThanOrEqual(hrTimeToMilliseconds(second.startTime))
  })

  it('turns performance.now() readings into the wall-clock times the SDK makes of them', () => {
    const spans = recorder()
    // Readings of the past, as a request's are when its spans are made (the SDK takes a later one for a date).
    const startedAt = performance.now() - 2_000
    const request = new RecordedRequestSpan(spans, 'b'.repeat(32), undefined, undefined, 'GET', startedAt, 'access_token')
    const endedAt = startedAt + 1234.5
    request.end(undefined, endedAt)
    const [ours] = spans.spans as [ReadableSpan]
    const provider = new BasicTracerProvider({ resource: RESOURCE, sampler: new AlwaysOnSampler() })
    const sdk = provider.getTracer(SCOPE.name).startSpan('GET', { startTime: startedAt })
    sdk.end(endedAt)
    const sdkSpan = sdk as unknown as ReadableSpan
    // The SDK corrects each span by the wall clock it reads as the span starts: a few ms at most apart.
    expect(Math.abs(hrTimeToMilliseconds(ours.startTime) - hrTimeToMilliseconds(sdkSpan.startTime))).toBeLessThan(5)
    expect(Math.abs(hrTimeToMilliseconds(ours.endTime) - hrTimeToMilliseconds(sdkSpan.endTime))).toBeLessThan(5)
    expect(hrTimeToMilliseconds(ours.duration)).toBeCloseTo(1234.5, 3)
    expect(ours.duration).toEqual(sdkSpan.duration)
  })

  it('ends a span whose end reading comes before its start at its start, as the SDK does, and gives the same times on every read', () => {
    const spans = recorder()
    const startedAt = performance.now() - 1_000
    const request = new RecordedRequestSpan(spans, 'c'.repeat(32), undefined, undefined, 'GET', startedAt, 'access_token')
    request.end(undefined, startedAt - 5)
    const [ours] = spans.spans as [ReadableSpan]
    const provider = new BasicTracerProvider({ resource: RESOURCE, sampler: new AlwaysOnSampler() })
    const sdk = provider.getTracer(SCOPE.name).startSpan('GET', { startTime: startedAt })
    sdk.end(startedAt - 5)
    const sdkSpan = sdk as unknown as ReadableSpan
    expect(ours.endTime).toEqual(ours.startTime)
    expect(ours.duration).toEqual([0, 0])
    expect(ours.duration).toEqual(sdkSpan.duration)
    // Made when read (ended-span.ts): each read gives the same values.
    expect(ours.startTime).toEqual(ours.startTime)
    expect(hrTimeToMilliseconds(ours.startTime)).toBe(hrTimeToMilliseconds(ours.startTime))
  })

  it('a SERVER span under a trusted parent, ended before its facts were known, serialises to the same bytes', () => {
    const spans = recorder()
    const parent: SpanContext = { traceId: 'e'.repeat(32), spanId: 'f'.repeat(16), traceFlags: TraceFlags.SAMPLED, isRemote: true }
    const request = new RecordedRequestSpan(spans, parent.traceId, parent, undefined, 'GET', performance.now(), 'access_token')
    request.end(undefined, performance.now())
    // Ended again (a second end is ignored, as the SDK's span ignores it): recorded once.
    request.end(undefined, performance.now())
    expect(spans.spans).toHaveLength(1)
    const [server] = spans.spans
    expect(server).toMatchObject({ name: 'GET', parentSpanContext: parent })
    expectSameBytes([server as ReadableSpan], [sdkTwin(server as ReadableSpan, { name: 'GET', kind: SpanKind.SERVER, parent, links: undefined, error: false, attributes: {} })])
  })
})
