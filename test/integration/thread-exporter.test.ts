import { ExportResultCode, type ExportResult } from '@opentelemetry/core'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { createThreadExporter, type ExportThreadSettings } from '../../src/tracing/thread-exporter.js'
import { answerJson, startFaultUpstream, type FaultExchange } from '../helpers/fault-upstream.js'

/*
 * The export thread (SPEC 17: export off the request path) against a real loopback collector:
 * each batch's bytes arrive as encoded, with the configured headers; what the collector answers
 * decides the result; shutdown waits for an export under way; a thread that cannot run fails
 * its batches, says so, and is started again by the next export.
 */

const BODY = Uint8Array.from([10, 3, 1, 2, 3])
const SPANS = [{}, {}] as unknown as ReadableSpan[]

function settings(url: string): ExportThreadSettings {
  return { url: `${url}/v1/traces`, headers: { 'x-collector-token': 'tok-collector-secret' }, timeoutMillis: 2_000, protocol: 'http/protobuf' }
}

function exported(exporter: SpanExporter): Promise<ExportResult> {
  return new Promise((resolve) => exporter.export(SPANS, resolve))
}

function protobufAnswer(exchange: FaultExchange, status: number): void {
  exchange.response.writeHead(status, { 'content-type': 'application/x-protobuf', 'content-length': 0 })
  exchange.response.end()
}

describe('the export thread', () => {
  it('posts each batch as encoded, with the configured headers, and says whether the collector took it', async () => {
    const collector = await startFaultUpstream((exchange) => protobufAnswer(exchange, 200))
    let stopped = 0
    const exporter = createThreadExporter(settings(collector.url), () => BODY, () => stopped++)
    expect((await exported(exporter)).code).toBe(ExportResultCode.SUCCESS)
    const [first] = collector.exchanges
    expect(first?.url).toBe('/v1/traces')
    expect(first?.headers['content-type']).toBe('application/x-protobuf')
    expect(first?.headers['x-collector-token']).toBe('tok-collector-secret')
    expect([...(first?.body ?? [])]).toEqual([...BODY])

    // A refusal the library does not retry (400) fails the batch, and tells nothing more.
    collector.setHandler((exchange) => answerJson(exchange, 400, { message: 'tok-collector-secret' }))
    const refused = await exported(exporter)
    expect(refused.code).toBe(ExportResultCode.FAILED)
    expect(String(refused.error)).not.toContain('tok-collector-secret')
    await exporter.shutdown()
    expect(stopped).toBe(0)
  })

  it('answers an export under way before shutdown resolves', async () => {
    const collector = await startFaultUpstream((exchange) => setTimeout(() => protobufAnswer(exchange, 200), 300))
    const exporter = createThreadExporter(settings(collector.url), () => BODY, () => undefined)
    const pending = exported(exporter)
    await collector.nextExchange()
    await exporter.shutdown()
    // Resolved already: the shutdown waited for the collector's answer.
    const settled = await Promise.race([pending, new Promise((resolve) => setImmediate(() => resolve('pending')))])
    expect(settled).toEqual({ code: ExportResultCode.SUCCESS })
  })

  it('fails the batches of a thread that cannot run, says so once with its code, and pauses before starting it again', async () => {
    const stops: (string | undefined)[] = []
    const exporter = createThreadExporter(settings('http://127.0.0.1:9'), () => BODY, (code) => stops.push(code), new URL('./no-such-thread.js', import.meta.url))
    expect((await exported(exporter)).code).toBe(ExportResultCode.FAILED)
    expect(stops).toEqual(['MODULE_NOT_FOUND'])
    // Started once more at once (a thread that ran and stopped comes back with the next batch), then paused.
    expect((await exported(exporter)).code).toBe(ExportResultCode.FAILED)
    const paused = await exported(exporter)
    expect(paused.code).toBe(ExportResultCode.FAILED)
    expect(paused.error?.message).toBe('the export thread is not running')
    expect(stops).toHaveLength(1)
    await exporter.shutdown()
  })

  it('shuts down once, however often asked, at once when it never exported, and takes no batch after', async () => {
    const collector = await startFaultUpstream((exchange) => protobufAnswer(exchange, 200))
    const idle = createThreadExporter(settings(collector.url), () => BODY, () => undefined)
    await idle.shutdown()
    const exporter = createThreadExporter(settings(collector.url), () => BODY, () => undefined)
    expect((await exported(exporter)).code).toBe(ExportResultCode.SUCCESS)
    await Promise.all([exporter.shutdown(), exporter.shutdown()])
    expect((await exported(exporter)).code).toBe(ExportResultCode.FAILED)
    expect(collector.exchanges).toHaveLength(1)
  })

  it('abandon(): the batch a silent collector holds fails at once, a shutdown under way ends, and no batch is taken after', async () => {
    const collector = await startFaultUpstream(() => {})
    const exporter = createThreadExporter({ ...settings(collector.url), timeoutMillis: 60_000 }, () => BODY, () => {})
    const held = exported(exporter)
    await collector.nextExchange()
    const shutting = exporter.shutdown()
    exporter.abandon()
    expect((await held).code).toBe(ExportResultCode.FAILED)
    await shutting
    expect((await exported(exporter)).code).toBe(ExportResultCode.FAILED)
    expect(collector.exchanges).toHaveLength(1)
  })

  it('keeps a process with nothing else to do alive until shutdown has the last answer of the thread (close() by an embedder)', async () => {
    const collector = await startFaultUpstream((exchange) => setTimeout(() => protobufAnswer(exchange, 200), 300))
    const built = fileURLToPath(new URL('../../dist/tracing/thread-exporter.js', import.meta.url))
    // The child's only handle is the thread (its output is not even a pipe): without it held, the
    // child would exit before shutdown resolves, with the exit code it set first. Started as a host
    // that evaluates its entry (`--input-type`), an option a thread refuses.
    const script = `
      process.exitCode = 3
      const { createThreadExporter } = await import(${JSON.stringify(built)})
      const exporter = createThreadExporter(${JSON.stringify(settings(collector.url))}, () => Uint8Array.from([1]), () => {})
      let exported
      exporter.export([{}], (result) => (exported = result.code))
      await new Promise((resolve) => setTimeout(resolve, 50))
      await exporter.shutdown()
      process.exitCode = exported === 0 ? 0 : 4
    `
    // Async: the collector answers from this process while the child runs.
    const { spawn } = await import('node:child_process')
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' })
    // A child that hangs is not left behind the test.
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    const exit = await new Promise((resolve) => child.on('exit', resolve))
    clearTimeout(killer)
    expect(exit).toBe(0)
    expect(collector.exchanges).toHaveLength(1)
  })

  it('never keeps a process alive by itself: one that exported and has nothing else to do exits', async () => {
    const collector = await startFaultUpstream((exchange) => protobufAnswer(exchange, 200))
    const built = fileURLToPath(new URL('../../dist/tracing/thread-exporter.js', import.meta.url))
    const script = `
      const { createThreadExporter } = await import(${JSON.stringify(built)})
      const exporter = createThreadExporter(${JSON.stringify(settings(collector.url))}, () => Uint8Array.from([1]), () => {})
      process.exitCode = 3
      // Held by a timer of its own until the batch is answered; then nothing but the thread is left.
      const held = setTimeout(() => {}, 60_000)
      exporter.export([{}], (result) => {
        clearTimeout(held)
        process.exitCode = result.code === 0 ? 0 : 4
      })
    `
    const { spawn } = await import('node:child_process')
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' })
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000)
    const exit = await new Promise<[number | null, string | null]>((resolve) => child.on('exit', (code, signal) => resolve([code, signal])))
    clearTimeout(killer)
    expect(exit).toEqual([0, null])
  })
})
