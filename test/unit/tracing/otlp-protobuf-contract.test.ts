import { createRequire } from 'node:module'
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, createTraceState, type Attributes, type Link, type SpanContext } from '@opentelemetry/api'
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources'
import { AlwaysOnSampler, BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base'
import { describe, expect, it } from 'vitest'
import { createSpanEncoder } from '../../../src/tracing/otlp-protobuf.js'
import { RecordedRequestSpan, type CallNames, type ServerSpanFacts } from '../../../src/tracing/request-span.js'
import type { UpstreamRequest } from '../../../src/upstream/upstream-client.js'

/*
 * The gateway writes OTLP protobuf itself (tracing/otlp-protobuf.ts) for speed. Held here to the
 * serializer the protobuf exporter itself loads: every batch, of the SDK's own spans with every
 * feature a ReadableSpan can carry and of the gateway's spans, must come out as the same bytes.
 */

interface TraceSerializer {
  serializeRequest(spans: ReadableSpan[]): Uint8Array | undefined
}

const exporterRequire = createRequire(createRequire(import.meta.url).resolve('@opentelemetry/exporter-trace-otlp-proto'))
const LIBRARY = (exporterRequire('@opentelemetry/otlp-transformer') as { ProtobufTraceSerializer: TraceSerializer }).ProtobufTraceSerializer

function libraryBytes(spans: ReadableSpan[]): Buffer {
  const bytes = LIBRARY.serializeRequest(spans)
  if (bytes === undefined) throw new Error('the library serialised nothing')
  return Buffer.from(bytes)
}

/** Every way through the encoder: at once, and in steps of one span and of three. */
function expectLibraryBytes(spans: ReadableSpan[], encoder = createSpanEncoder()): void {
  const theirs = libraryBytes(spans).toString('hex')
  // Hex, so that a difference shows where it starts.
  expect(Buffer.from(encoder.encode(spans)).toString('hex')).toBe(theirs)
  for (const spansPerStep of [1, 3]) expect(Buffer.from(allSteps(encoder.steps(spans, spansPerStep))).toString('hex')).toBe(theirs)
}

function allSteps(steps: Generator<undefined, Uint8Array, undefined>): Uint8Array {
  for (;;) {
    const next = steps.next()
    if (next.done === true) return next.value
  }
}

interface Scripted {
  name: string
  kind?: SpanKind
  parent?: SpanContext
  links?: Link[]
  attributes?: Attributes
  events?: { name: string; attributes?: Attributes; time?: [number, number] }[]
  status?: { code: SpanStatusCode; message?: string }
  startTime?: [number, number]
  endTime?: [number, number]
}

/** Spans as the SDK's own tracer records them, all under one provider (one resource) and the tracers given. */
function sdkSpans(resource: Resource, scripts: { scope: { name: string; version?: string; schemaUrl?: string }; span: Scripted }[]): ReadableSpan[] {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ resource, sampler: new AlwaysOnSampler(), spanProcessors: [new SimpleSpanProcessor(exporter)] })
  for (const { scope, span: script } of scripts) {
    const tracer = provider.getTracer(scope.name, scope.version, scope.schemaUrl === undefined ? {} : { schemaUrl: scope.schemaUrl })
    const context = script.parent === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, script.parent)
    const span = tracer.startSpan(script.name, { kind: script.kind, links: script.links, startTime: script.startTime, root: script.parent === undefined }, context)
    if (script.attributes !== undefined) span.setAttributes(script.attributes)
    for (const event of script.events ?? []) span.addEvent(event.name, event.attributes, event.time)
    if (script.status !== undefined) span.setStatus(script.status)
    span.end(script.endTime)
  }
  return exporter.getFinishedSpans()
}

const SCOPE = { name: 'v4-migration-gateway', version: '1.2.3' }
const REMOTE: SpanContext = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED, isRemote: true }
const LOCAL: SpanContext = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: TraceFlags.NONE, isRemote: false }

describe('the gateway\'s OTLP protobuf encoder (contract with @opentelemetry/otlp-transformer)', () => {
  it('writes attribute values of every type as the library does', () => {
    const resource = resourceFromAttributes({ 'service.name': 'contract', 'service.version': '1.2.3' })
    const attributes: Attributes = {
      ascii: 'GET /v4/*',
      empty: '',
      accented: 'café — naïve',
      emoji: 'run 🚀 now',
      lone: 'half \ud800 surrogate',
      long127: 'x'.repeat(127),
      long128: 'y'.repeat(128),
      long16k: 'z'.repeat(16_384),
      wide: 'é'.repeat(70),
      // KeyValue lengths of 127 and 128 bytes: the last that is written with lengths known up front, and the first that is not.
      edge1: 'e'.repeat(116),
      edge2: 'e'.repeat(117),
      late: `${'a'.repeat(40)}é`,
      zero: 0,
      small: 127,
      varint2: 128,
      int31: 2 ** 31,
      int32: 2 ** 32,
      big: 2 ** 53 + 2,
      huge: 2 ** 62,
      negative: -1,
      negativeBig: -(2 ** 40) - 7,
      int64Min: -(2 ** 63),
      int64End: 2 ** 63,
      fraction: 0.25,
      negativeFraction: -1234.5678,
      nan: Number.NaN,
      infinity: Number.POSITIVE_INFINITY,
      yes: true,
      no: false,
      strings: ['a', 'bé', ''],
      numbers: [1, -2, 3.5],
      booleans: [true, false],
      holes: ['a', null, undefined, 'b'] as unknown as string[],
      none: []
    }
    expectLibraryBytes(sdkSpans(resource, [{ scope: SCOPE, span: { name: 'attributes', kind: SpanKind.SERVER, attributes } }]))
  })

  it('writes parents, links, trace state, events, statuses and every kind as the library does', () => {
    const resource = resourceFromAttributes({ 'service.name': 'contract' })
    const withState: SpanContext = { ...REMOTE, traceState: createTraceState('vendor=a1,other=b2') }
    const scripts: { scope: typeof SCOPE; span: Scripted }[] = [
      { scope: SCOPE, span: { name: 'remote parent', kind: SpanKind.SERVER, parent: withState } },
      { scope: SCOPE, span: { name: 'local parent', kind: SpanKind.CLIENT, parent: LOCAL, status: { code: SpanStatusCode.ERROR, message: 'upstream refused' } } },
      { scope: SCOPE, span: { name: 'linked', kind: SpanKind.INTERNAL, links: [{ context: REMOTE }, { context: withState, attributes: { reason: 'untrusted', count: 2 } }, { context: LOCAL, attributes: {} }] } },
      { scope: SCOPE, span: { name: 'events', kind: SpanKind.PRODUCER, events: [{ name: 'first' }, { name: 'second', attributes: { at: 1, why: 'é' }, time: [1_764_300_000, 5] }] } },
      { scope: SCOPE, span: { name: 'ok', kind: SpanKind.CONSUMER, status: { code: SpanStatusCode.OK } } }
    ]
    expectLibraryBytes(sdkSpans(resource, scripts))
  })

  it('writes times across the range of fixed64 nanoseconds as the library does', () => {
    const resource = resourceFromAttributes({})
    const times: [number, number][] = [
      [0, 0],
      [0, 999_999_999],
      [1, 0],
      [65_535, 999_999_999],
      [65_536, 1],
      [1_764_300_000, 123_456_789],
      [2 ** 31 - 1, 999_999_999],
      [2 ** 32 + 17, 42]
    ]
    const scripts = times.map((time) => ({ scope: SCOPE, span: { name: `at ${time.join('.')}`, startTime: time, endTime: time } }))
    expectLibraryBytes(sdkSpans(resource, scripts))
  })

  it('groups spans by resource, then by scope, in the order they first appear, with their schema URLs', () => {
    const first = resourceFromAttributes({ 'service.name': 'first', replicas: 3 }, { schemaUrl: 'https://opentelemetry.io/schemas/1.26.0' })
    const second = resourceFromAttributes({ 'service.name': 'second' })
    const scopes = [SCOPE, { name: 'other', schemaUrl: 'https://example.test/schema' }, { name: 'bare' }]
    const a = sdkSpans(first, [
      { scope: scopes[0]!, span: { name: 'a1' } },
      { scope: scopes[1]!, span: { name: 'a2' } },
      { scope: scopes[0]!, span: { name: 'a3' } }
    ])
    const b = sdkSpans(second, [{ scope: scopes[2]!, span: { name: 'b1' } }])
    expectLibraryBytes([a[0]!, b[0]!, a[1]!, a[2]!])
  })

  it('writes a batch whose lengths take four bytes, and one of a single tiny span', () => {
    const resource = resourceFromAttributes({ 'service.name': 'contract' })
    // Over 2 MiB in one ResourceSpans: its length and its ScopeSpans' need four bytes, one more than guessed.
    const large = sdkSpans(resource, Array.from({ length: 140 }, (_, index) => ({ scope: SCOPE, span: { name: `large ${index}`, attributes: { body: 'q'.repeat(16_000) } } })))
    expectLibraryBytes(large)
    // A span under 128 bytes: one byte of length, one fewer than guessed.
    expectLibraryBytes(sdkSpans(resourceFromAttributes({}), [{ scope: { name: 's' }, span: { name: 'n' } }]))
    expectLibraryBytes([])
  })

  it('writes the gateway\'s own spans (a request and its calls) as the library does', () => {
    const resource = resourceFromAttributes({ 'service.name': 'v4-migration-gateway', 'service.version': '1.2.3' })
    const recorded: ReadableSpan[] = []
    let next = 0
    const recorder = { resource, scope: SCOPE, newSpanId: () => (++next).toString(16).padStart(16, '0'), record: (span: ReadableSpan) => recorded.push(span) }
    const request = new RecordedRequestSpan(recorder, REMOTE.traceId, REMOTE, [{ context: LOCAL }], 'POST', performance.now(), 'access_token')
    const names: CallNames = { buffered: () => ({ name: 'POST /v4/sessions/{sessionId}/executions.execute', resendCount: 1 }), streamed: () => 'POST /v4/*', queryCredential: 'access_token', shadow: true }
    const tracer = request.callTracer(() => names)
    const call = tracer.traceCall({ method: 'POST', origin: 'http://127.0.0.1:4010', path: '/v4/sessions/s-1/executions.execute?access_token=secret&x=1', headers: {} } as unknown as UpstreamRequest, false)
    call.answered(502)
    call.end(performance.now())
    const facts: ServerSpanFacts = {
      name: 'POST /v1/headless/runs',
      route: '/v1/headless/runs',
      statusCode: 502,
      failed: true,
      errorCode: 'UPSTREAM_ERROR',
      scheme: 'http',
      path: '/v1/headless/runs',
      rawQuery: 'a=1&access_token=secret',
      httpVersion: '1.1',
      serverAddress: 'gateway.internal',
      serverPort: 8080,
      clientAddress: '127.0.0.1',
      userAgent: 'legacy-client/2.0 (é)',
      tenant: 'acme',
      trafficClass: 'legacy-runtime',
      legacyRoute: 'POST /v1/headless/runs',
      sessionOutcome: 'hit',
      credentialType: 'session',
      migrationStage: 'translate',
      servedBy: 'v4',
      deprecationAction: 'warned',
      idempotencyOutcome: undefined
    }
    request.end(facts, performance.now())
    expect(recorded).toHaveLength(2)
    expectLibraryBytes(recorded)
  })

  it('reuses its scratch space without changing what it returned before', () => {
    const encoder = createSpanEncoder()
    const resource = resourceFromAttributes({ 'service.name': 'contract' })
    const first = sdkSpans(resource, [{ scope: SCOPE, span: { name: 'first', attributes: { text: 'a'.repeat(300) } } }])
    const second = sdkSpans(resource, [{ scope: SCOPE, span: { name: 'second', attributes: { text: 'b'.repeat(2_000_000) } } }])
    const firstBytes = encoder.encode(first)
    const copy = Buffer.from(firstBytes)
    // The second batch outgrows the scratch space, the third starts again small.
    expectLibraryBytes(second, encoder)
    expectLibraryBytes(first, encoder)
    expect(Buffer.from(firstBytes).equals(copy)).toBe(true)
  })

  it('writes a batch in steps of the size asked, and two batches in steps at once each as the library does', () => {
    const encoder = createSpanEncoder()
    const resource = resourceFromAttributes({ 'service.name': 'contract' })
    const other = resourceFromAttributes({ 'service.name': 'other' })
    const scripts = (prefix: string, count: number) => Array.from({ length: count }, (_, index) => ({ scope: index % 3 === 0 ? { name: 'another' } : SCOPE, span: { name: `${prefix}-${index}`, attributes: { text: prefix.repeat(200 + index) } } }))
    // Two resources and two scopes, so that steps fall inside open messages of every level.
    const first = [...sdkSpans(resource, scripts('a', 7)), ...sdkSpans(other, scripts('b', 4))]
    const second = sdkSpans(resource, scripts('c', 9))
    const firstSteps = encoder.steps(first, 2)
    const secondSteps = encoder.steps(second, 4)
    let firstCount = 0
    let secondCount = 0
    let firstBody: Uint8Array | undefined
    let secondBody: Uint8Array | undefined
    // Alternated, as two exports' steps are at shutdown: each batch keeps its own scratch space.
    while (firstBody === undefined || secondBody === undefined) {
      if (firstBody === undefined) {
        const next = firstSteps.next()
        firstCount++
        if (next.done === true) firstBody = next.value
      }
      if (secondBody === undefined) {
        const next = secondSteps.next()
        secondCount++
        if (next.done === true) secondBody = next.value
      }
    }
    // 11 spans two at a time and 9 four at a time: one call per step.
    expect([firstCount, secondCount]).toEqual([6, 3])
    expect(Buffer.from(firstBody).toString('hex')).toBe(libraryBytes(first).toString('hex'))
    expect(Buffer.from(secondBody).toString('hex')).toBe(libraryBytes(second).toString('hex'))
    // The scratch space came back: a batch written at once afterwards is whole too.
    expectLibraryBytes(second, encoder)
  })

  it('writes text that needs a longer length than guessed wherever it ends against the end of its scratch space', () => {
    const resource = resourceFromAttributes({ 'service.name': 'contract' })
    // Three bytes of UTF-8 for each UTF-16 unit, at lengths whose length prefix takes one byte more than the text's length suggests.
    for (const text of ['€'.repeat(43), '\ud800'.repeat(43), '€'.repeat(5_462)]) {
      // Attributes of 72 bytes each up to about 300 bytes before the first scratch space's end (64 KiB),
      // then a pad that moves the text's end across that end a byte at a time (it ends there at a
      // pad of about 160 characters).
      const base: Attributes = {}
      const count = Math.floor((65_536 - text.length * 3 - 300) / 72)
      for (let index = 0; index < count; index++) base[`a${index.toString().padStart(3, '0')}`] = 'v'.repeat(60)
      // The SDK keeps 128 attributes of a span; the others are set on a span derived from its own.
      const [template] = sdkSpans(resource, [{ scope: SCOPE, span: { name: 'sweep' } }])
      for (let padding = 0; padding < 320; padding++) {
        const span = Object.assign(Object.create(template as object) as ReadableSpan, { attributes: { ...base, pad: 'p'.repeat(padding), text } })
        expectLibraryBytes([span])
      }
    }
  })

  it('writes what a ReadableSpan may hold but the SDK never makes as the library does', () => {
    const resource = resourceFromAttributes({ 'service.name': 'contract' })
    const scope = { name: 'hand-made' }
    const context: SpanContext = { traceId: REMOTE.traceId, spanId: REMOTE.spanId, traceFlags: TraceFlags.SAMPLED }
    // A span made by hand: the fields a ReadableSpan has, then the case's own.
    const made = (fields: Record<string, unknown>, spanContext: SpanContext = context): ReadableSpan =>
      ({
        name: 'hand-made', kind: SpanKind.INTERNAL, spanContext: () => spanContext, parentSpanContext: undefined, startTime: [1_764_300_000, 5], endTime: [1_764_300_001, 6],
        attributes: {}, droppedAttributesCount: 0, events: [], droppedEventsCount: 0, links: [], droppedLinksCount: 0, status: { code: SpanStatusCode.UNSET },
        resource, instrumentationScope: scope, duration: [1, 1], ended: true, ...fields
      }) as unknown as ReadableSpan
    const cases: ReadableSpan[] = [
      made({}, { ...context, traceId: REMOTE.traceId.slice(1), spanId: REMOTE.spanId.toUpperCase() }),
      made({ parentSpanContext: { ...LOCAL, spanId: LOCAL.spanId.slice(3), isRemote: 1 } }),
      made({ links: [{ context: { ...REMOTE, spanId: 'abc', isRemote: 'yes' } }] }),
      made({ kind: undefined }),
      made({ kind: -1 }),
      made({ droppedAttributesCount: -1, droppedEventsCount: 2 ** 32 + 1, droppedLinksCount: 2 ** 40, status: { code: 5e9, message: 'ünusual' } }),
      made({ startTime: [1.5, 0], endTime: [2 ** 33 + 5, 2_500_000_000] }),
      made({ attributes: { nested: { a: 1, b: { c: 'é'.repeat(70) }, d: [1, { e: null }] }, bytes: new Uint8Array([1, 2, 3]), empty: {} } }),
      made({ events: [{ name: 'no attributes', time: [1, 1] }, { name: 'dropped', time: [2, 2], attributes: { a: 1 }, droppedAttributesCount: 3 }] })
    ]
    for (const span of cases) expectLibraryBytes([span])
    expectLibraryBytes(cases)
  })
})
