import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { AlwaysOnSampler, BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base'
import { describe, expect, it } from 'vitest'
import { encodingAhead, SPANS_PER_STEP } from '../../../src/tracing/encode-ahead.js'
import { createSpanEncoder, type SpanEncoder } from '../../../src/tracing/otlp-protobuf.js'

/** `count` ended spans of the SDK's own tracer. */
function endedSpans(count: number): ReadableSpan[] {
  const memory = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes({ 'service.name': 'encode-ahead' }), sampler: new AlwaysOnSampler(), spanProcessors: [new SimpleSpanProcessor(memory)] })
  const tracer = provider.getTracer('encode-ahead')
  for (let index = 0; index < count; index++) tracer.startSpan(`span-${index}`, { attributes: { index } }).end()
  return memory.getFinishedSpans()
}

/** An inner exporter that serialises as the library's delegate does (through `serialize`) and answers at once. */
function recordingInner(serialize: (spans: readonly ReadableSpan[]) => Uint8Array): SpanExporter & { bodies: Uint8Array[] } {
  const bodies: Uint8Array[] = []
  return {
    bodies,
    export(spans, done) {
      bodies.push(serialize(spans))
      done({ code: ExportResultCode.SUCCESS })
    },
    shutdown: () => Promise.resolve()
  }
}

function exported(exporter: SpanExporter, spans: ReadableSpan[]): Promise<ExportResult> {
  return new Promise((resolve) => exporter.export(spans, resolve))
}

describe('a batch encoded ahead of its export (tracing/encode-ahead.ts)', () => {
  it('lets the event loop run between steps, then exports the body written ahead', async () => {
    const encoder = createSpanEncoder()
    const encoding = encodingAhead(encoder)
    const inner = recordingInner(encoding.serialize)
    const exporter = encoding.exporter(inner)
    const spans = endedSpans(SPANS_PER_STEP * 3 + 5)
    // What else the loop has to do: counted until the export reaches the inner exporter.
    let turns = 0
    let exportedYet = false
    const other = (): void => {
      if (exportedYet) return
      turns++
      setImmediate(other)
    }
    setImmediate(other)
    const result = exported(exporter, spans)
    // Nothing went out within the call: the first step only.
    expect(inner.bodies).toHaveLength(0)
    expect((await result).code).toBe(ExportResultCode.SUCCESS)
    exportedYet = true
    // Four steps, three turns of the loop between them.
    expect(turns).toBeGreaterThanOrEqual(3)
    expect(inner.bodies).toHaveLength(1)
    expect(Buffer.from(inner.bodies[0] as Uint8Array).equals(Buffer.from(createSpanEncoder().encode(spans)))).toBe(true)
  })

  it('hands a batch still being written to the inner exporter before stopping it, when shut down meanwhile', async () => {
    const encoding = encodingAhead(createSpanEncoder())
    const calls: string[] = []
    const inner: SpanExporter = {
      export(spans, done) {
        calls.push(`export ${spans.length}`)
        done({ code: ExportResultCode.SUCCESS })
      },
      shutdown: () => {
        calls.push('shutdown')
        return Promise.resolve()
      }
    }
    const exporter = encoding.exporter(inner)
    const result = exported(exporter, endedSpans(SPANS_PER_STEP * 2 + 1))
    await exporter.shutdown()
    expect(calls).toEqual([`export ${SPANS_PER_STEP * 2 + 1}`, 'shutdown'])
    expect((await result).code).toBe(ExportResultCode.SUCCESS)
    // With nothing being written, a shutdown stops the inner exporter at once.
    const idle = encoding.exporter(inner)
    calls.length = 0
    await idle.shutdown()
    expect(calls).toEqual(['shutdown'])
  })

  it('serialises a batch that was not written ahead at once', () => {
    const encoding = encodingAhead(createSpanEncoder())
    const spans = endedSpans(3)
    expect(Buffer.from(encoding.serialize(spans)).equals(Buffer.from(createSpanEncoder().encode(spans)))).toBe(true)
  })

  it('fails the export, without calling the inner exporter, when a step throws', async () => {
    const failing: SpanEncoder = {
      encode: () => {
        throw new Error('not used')
      },
      // eslint-disable-next-line require-yield -- a generator that fails on its first step
      *steps() {
        throw new RangeError('Invalid array length')
      }
    }
    const encoding = encodingAhead(failing)
    const inner = recordingInner(encoding.serialize)
    const result = await exported(encoding.exporter(inner), endedSpans(1))
    expect(result.code).toBe(ExportResultCode.FAILED)
    expect(result.error?.message).toBe('Invalid array length')
    expect(inner.bodies).toHaveLength(0)
  })
})
