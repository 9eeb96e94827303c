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

/** How long a thread that stopped again without answering stays stopped before an export starts it once more. */
const THREAD_RESTART_PAUSE_MS = 30_000

/** The span exporter, and a way to let go of its thread when there is no time left to wait for it. */
export interface ThreadExporter extends SpanExporter {
  /**
   * The grace period ended before the shutdown did (SPEC 9): the thread is stopped now, the
   * batches it still held fail (counted as dropped), and nothing of it keeps the process alive,
   * since an embedder's `close()` has returned. No batch is taken after.
   */
  abandon(): void
}

export type ToExportThread = { kind: 'export'; id: number; batch: EncodedBatch } | { kind: 'shutdown' }
export type FromExportThread = { kind: 'exported'; id: number; ok: boolean } | { kind: 'shut' }

/**
 * A span exporter that encodes each batch on the gateway's thread and posts it to a worker
 * thread, which sends it over OTLP/HTTP with the library's transport (otlp-export-thread.ts).
 * Why a thread: a process that makes the export's network calls on its own event loop served
 * about 3 % fewer requests at `sampleRatio: 0.01`, however few the exports, and whatever made
 * them (node:http, undici, the gateway's own pool); with the calls in a thread it did not
 * (docs/performance.md). The thread starts with the first export, and again after it stopped
 * (its batches failed; `onThreadStopped` hears of it once until the thread answers again).
 * No answer from the collector, nor any error message of the thread, crosses back: only whether
 * the batch went, and why a thread stopped by its error's code (a header may carry a credential,
 * and a collector may echo it).
 */
export function createThreadExporter(
  settings: ExportThreadSettings,
  encode: (spans: ReadableSpan[]) => Uint8Array | undefined,
  onThreadStopped: (code: string | undefined) => void,
  threadFile: URL = exportThreadFile()
): ThreadExporter {
  let thread: Worker | undefined
  let nextId = 0
  const waiting = new Map<number, (result: ExportResult) => void>()
  let whenIdle: Array<() => void> = []
  let shut: (() => void) | undefined
  let closing: Promise<void> | undefined
  // Stops since the thread last answered: a thread that cannot start says so once, and is started
  // again only after a pause (its batches meanwhile fail at once), not for every batch.
  let stopsSinceAnswer = 0
  let restartAt = 0
  let stopCode: string | undefined

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

  function started(): Worker | undefined {
    if (thread !== undefined) return thread
    if (performance.now() < restartAt) return undefined
    // None of the process's Node options: a `--require`d agent has nothing to do in the thread, and
    // some options (`--input-type`, set by a host that evaluates its entry) refuse a thread's file.
    const worker = new Worker(threadFile, { workerData: settings, execArgv: [] })
    worker.on('message', (message: FromExportThread) => {
      stopsSinceAnswer = 0
      if (message.kind === 'exported') answer(message.id, message.ok)
      else shut?.()
    })
    // An error of the thread is followed by its exit, which answers what it held. Only its code
    // is told (MODULE_NOT_FOUND, ERR_WORKER_OUT_OF_MEMORY): a message could quote a header.
    worker.on('error', (error: Error & { code?: unknown }) => {
      stopCode = typeof error.code === 'string' ? error.code : error.name
    })
    worker.on('exit', () => {
      if (thread === worker) thread = undefined
      for (const id of [...waiting.keys()]) answer(id, false)
      if (shut !== undefined) return shut()
      if (stopsSinceAnswer++ > 0) restartAt = performance.now() + THREAD_RESTART_PAUSE_MS
      else onThreadStopped(stopCode)
      stopCode = undefined
    })
    // The export never keeps the process alive; shutdown flushes what waits (SPEC 17). After the
    // listeners: adding a 'message' listener refs the thread again.
    worker.unref()
    thread = worker
    return worker
  }

  return {
    export(spans, done) {
      const failed = (why: string): void => done({ code: ExportResultCode.FAILED, error: new Error(why) })
      if (closing !== undefined) return failed('the exporter is shut down')
      const body = encode(spans)
      if (body === undefined || body.length === 0) return failed('nothing to send')
      let worker: Worker | undefined
      try {
        worker = started()
      } catch {
        // A thread that cannot even be made (out of memory, too many threads): the batch fails, the request path never sees it.
        worker = undefined
      }
      if (worker === undefined) return failed('the export thread is not running')
      const id = nextId++
      waiting.set(id, done)
      const message: ToExportThread = { kind: 'export', id, batch: { body, spans: spans.length } }
      worker.postMessage(message)
    },
    forceFlush() {
      return waiting.size === 0 ? Promise.resolve() : new Promise((resolve) => whenIdle.push(resolve))
    },
    shutdown() {
      closing ??= (async () => {
        const worker = thread
        if (worker === undefined) return
        // Held while it answers what it holds: a caller of close() (an embedder) may have nothing else keeping the process up.
        worker.ref()
        await new Promise<void>((resolve) => {
          shut = resolve
          const message: ToExportThread = { kind: 'shutdown' }
          worker.postMessage(message)
        })
        await worker.terminate()
      })()
      return closing
    },
    abandon() {
      closing ??= Promise.resolve()
      const worker = thread
      if (worker === undefined) return
      worker.unref()
      // Its exit answers what it held (failed) and ends a shutdown under way.
      void worker.terminate()
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
