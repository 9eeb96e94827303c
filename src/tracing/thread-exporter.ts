import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base'
import { Worker } from 'node:worker_threads'

/** Where and how the export thread posts (SPEC 17's `tracing` settings, restart-only). */
export interface ExportThreadSettings {
  url: string
  headers: Record<string, string>
  timeoutMillis: number
  protocol: 'http/protobuf' | 'http/json'
}

/** One batch as it crosses to the export thread: its encoded body, and how many spans it holds. */
export interface EncodedBatch {
  body: Uint8Array
  spans: number
}

export type ToExportThread = { kind: 'export'; id: number; batch: EncodedBatch } | { kind: 'shutdown' }
export type FromExportThread = { kind: 'exported'; id: number; ok: boolean } | { kind: 'shut' }

/**
 * A span exporter that encodes each batch on the gateway's thread and posts it to a worker
 * thread, which sends it over OTLP/HTTP with the library's transport (otlp-export-thread.ts).
 * Why a thread: a process that makes the export's network calls on its own event loop served
 * about 3 % fewer requests at `sampleRatio: 0.01`, however few the exports, and whatever made
 * them (node:http, undici, the gateway's own pool); with the calls in a thread it did not
 * (docs/performance.md). The thread starts with the first export, and again after one it failed.
 * No answer from the collector, nor any error of the thread, crosses back: only whether the
 * batch went (a header may carry a credential, and a collector may echo it).
 */
export function createThreadExporter(settings: ExportThreadSettings, encode: (spans: ReadableSpan[]) => Uint8Array | undefined, onThreadStopped: () => void, threadFile: URL = exportThreadFile()): SpanExporter {
  let thread: Worker | undefined
  let nextId = 0
  const waiting = new Map<number, (result: ExportResult) => void>()
  let whenIdle: Array<() => void> = []
  let shut: (() => void) | undefined

  function answer(id: number, ok: boolean): void {
    const done = waiting.get(id)
    if (done === undefined) return
    waiting.delete(id)
    done(ok ? { code: ExportResultCode.SUCCESS } : { code: ExportResultCode.FAILED, error: new Error('the collector did not take the batch') })
    if (waiting.size === 0) {
      for (const resolve of whenIdle) resolve()
      whenIdle = []
    }
  }

  function started(): Worker {
    if (thread !== undefined) return thread
    const worker = new Worker(threadFile, { workerData: settings })
    // The export never keeps the process alive; shutdown flushes what waits (SPEC 17).
    worker.unref()
    worker.on('message', (message: FromExportThread) => {
      if (message.kind === 'exported') answer(message.id, message.ok)
      else shut?.()
    })
    // An error of the thread is followed by its exit, which answers what it held.
    worker.on('error', () => undefined)
    worker.on('exit', () => {
      if (thread === worker) thread = undefined
      for (const id of [...waiting.keys()]) answer(id, false)
      if (shut === undefined) onThreadStopped()
      else shut()
    })
    thread = worker
    return worker
  }

  return {
    export(spans, done) {
      const body = encode(spans)
      if (body === undefined || body.length === 0) return done({ code: ExportResultCode.FAILED, error: new Error('nothing to send') })
      const id = nextId++
      waiting.set(id, done)
      const message: ToExportThread = { kind: 'export', id, batch: { body, spans: spans.length } }
      started().postMessage(message)
    },
    forceFlush() {
      return waiting.size === 0 ? Promise.resolve() : new Promise((resolve) => whenIdle.push(resolve))
    },
    async shutdown() {
      const worker = thread
      if (worker === undefined) return
      await new Promise<void>((resolve) => {
        shut = resolve
        const message: ToExportThread = { kind: 'shutdown' }
        worker.postMessage(message)
      })
      await worker.terminate()
    }
  }
}

/**
 * The thread's file, built beside this module. Under a test runner that runs the TypeScript
 * sources, the built one: the thread is a plain Node worker, which cannot load TypeScript
 * (the test setup builds dist/ first).
 */
function exportThreadFile(): URL {
  const here = import.meta.url
  return here.endsWith('.ts') ? new URL('../../dist/tracing/otlp-export-thread.js', here) : new URL('./otlp-export-thread.js', here)
}
