import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base'
import type { SpanEncoder } from './otlp-protobuf.js'

/**
 * Spans written per turn of the event loop: about 90 µs of a gateway's spans (1.4 µs each in the
 * process, docs/performance.md), short beside a request's p50 of about 2 ms.
 */
export const SPANS_PER_STEP = 64

/**
 * An export's protobuf body written a step at a time, before the export goes to the library's
 * exporter, which serialises a batch in one synchronous call. A batch of 1,024 spans took about
 * 1.4 ms at once, every 25 ms while tracing everything: the requests waiting on the event loop
 * meanwhile made the traced row's p99 over 3x its p50 (SPEC 17: export off the request path;
 * docs/performance.md). Smaller batches would cut the pause too, but each export has a fixed price.
 *
 * `serialize` is the library delegate's serializer: the body written ahead for that batch, or, for
 * a batch that did not come through `exporter` (none in the gateway), the whole batch at once.
 */
export function encodingAhead(encoder: SpanEncoder): {
  serialize(spans: readonly ReadableSpan[]): Uint8Array
  exporter(inner: SpanExporter): SpanExporter
} {
  // Keyed by the batch's array, which the library's exporter hands its serializer unchanged.
  const ahead = new WeakMap<readonly ReadableSpan[], Uint8Array>()
  return {
    serialize(spans) {
      const body = ahead.get(spans)
      if (body === undefined) return encoder.encode(spans)
      ahead.delete(spans)
      return body
    },
    exporter(inner) {
      // Batches still being written: a shutdown hands them to `inner` before stopping it, as the
      // SDK's processor, whose last flush does not wait for a batch its timer sent, would not.
      let writing = 0
      const written: (() => void)[] = []
      const settled = (): void => {
        if (--writing === 0) for (const resolve of written.splice(0)) resolve()
      }
      return {
        export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
          const steps = encoder.steps(spans, SPANS_PER_STEP)
          writing++
          const step = (): void => {
            let next: IteratorResult<undefined, Uint8Array>
            try {
              next = steps.next()
            } catch (error) {
              settled()
              done({ code: ExportResultCode.FAILED, error: error instanceof Error ? error : new Error(String(error)) })
              return
            }
            if (next.done !== true) {
              setImmediate(step)
              return
            }
            ahead.set(spans, next.value)
            settled()
            inner.export(spans, done)
          }
          step()
        },
        forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
        async shutdown() {
          if (writing > 0) await new Promise<void>((resolve) => written.push(resolve))
          return inner.shutdown()
        }
      }
    }
  }
}
