import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { freePort } from '../helpers/free-port.js'
import { listenOnLoopback } from '../helpers/http-server.js'
import { send } from '../helpers/http.js'
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { spawnGateway } from '../helpers/spawn-gateway.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

// Issue 30 point 4 (SPEC 17): spans leave in batches off the request path. A collector that is
// down, never answers or refuses never slows or fails a request; spans over the queue's bound
// are dropped and counted; on SIGTERM the queue is flushed within the grace period.

const ALICE = { authorization: 'Bearer demo-token-alice' }

async function droppedSpans(gw: StartedGateway, reason: string): Promise<number> {
  const metrics = await send(gw.adminUrl, '/metrics')
  const match = new RegExp(`^v4gw_trace_spans_dropped_total\\{reason="${reason}"\\} (\\d+)$`, 'm').exec(metrics.text)
  return match === null ? -1 : Number(match[1])
}

/** `count` legacy requests one after another; each must be answered 200 by the V4 upstream. */
async function serveAll(gw: StartedGateway, count: number): Promise<number[]> {
  const statuses: number[] = []
  for (let index = 0; index < count; index++) statuses.push((await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: index } })).status)
  return statuses
}

/** Closes `gw` and checks it took less than half the export's timeout (tracing.ts: 10 s), whatever the collector does. */
async function expectClosedBeforeExportTimeout(gw: StartedGateway): Promise<void> {
  const started = performance.now()
  await gw.close()
  expect(performance.now() - started).toBeLessThan(5_000)
}

describe('exporting spans to a collector that misbehaves', () => {
  const upstream = useRecordingUpstream()

  function tracedGateway(endpoint: string, tracing: Record<string, unknown> = {}): Promise<StartedGateway> {
    // A short grace period: closing the gateway must not wait on the collector past it.
    return startGateway(testConfig(upstream.url, { shutdown: { graceMs: 300 }, tracing: { enabled: true, endpoint, sampleRatio: 1, batchDelayMs: 10, ...tracing } }))
  }

  it('a collector that never answers: every request is answered while its export hangs, and the spans over the queue’s bound are dropped and counted', async () => {
    const receiver: OtlpReceiver = await startOtlpReceiver({ kind: 'hang' })
    const gw = await tracedGateway(receiver.endpoint, { maxQueueSpans: 4 })
    expect(await serveAll(gw, 3)).toEqual([200, 200, 200])
    await until(() => receiver.held > 0)
    // The export is held open; requests go on being served, and the queue overflows.
    expect(await serveAll(gw, 6)).toEqual([200, 200, 200, 200, 200, 200])
    expect(receiver.held).toBe(1)
    expect(await droppedSpans(gw, 'queue_full')).toBeGreaterThan(0)
    // Closing ends within the grace period (300 ms), the collector still silent: well before the
    // export's own 10-s timeout, the bound a wrong close would wait for.
    await expectClosedBeforeExportTimeout(gw)
  })

  it('a collector that refuses (400): requests are served, the batch’s spans are counted as export_failed, and one warning says so', async () => {
    const receiver = await startOtlpReceiver({ kind: 'refuse', status: 400 })
    // A vendor's key in the endpoint's query reaches no log line (SPEC 17: collector credentials are never logged).
    const gw = await tracedGateway(`${receiver.endpoint}?api-key=otlp-key-in-a-query-1`)
    expect(await serveAll(gw, 3)).toEqual([200, 200, 200])
    await until(async () => (await droppedSpans(gw, 'export_failed')) > 0)
    expect(await droppedSpans(gw, 'queue_full')).toBe(0)
    expect(await serveAll(gw, 2)).toEqual([200, 200])
    await until(() => receiver.requests.length > 1)
    const warnings = gw.logs.lines().filter((line) => typeof line.msg === 'string' && line.msg.startsWith('trace export failed'))
    expect(warnings).toHaveLength(1)
    expect(warnings[0]?.level).toBe(40)
    expect(gw.logs.lines()).toContainEqual(expect.objectContaining({ msg: 'tracing: exporting spans over OTLP', endpoint: `${receiver.endpoint}?…` }))
    expect(gw.logs.text()).not.toContain('otlp-key-in-a-query-1')
  })

  it('a collector that is down (connection refused): requests are served, and closing the gateway ends within the grace period', async () => {
    const gw = await tracedGateway(`http://127.0.0.1:${await freePort()}/v1/traces`)
    expect(await serveAll(gw, 5)).toEqual([200, 200, 200, 200, 200])
    const native = await send(gw.url, '/v4/anything', { headers: ALICE })
    expect(native.status).toBe(200)
    await expectClosedBeforeExportTimeout(gw)
  })

  it('sends a full batch of 1,024 spans as one export, and none before it is full', async () => {
    const receiver = await startOtlpReceiver()
    // Only a full batch goes before ten minutes have passed.
    const gw = await tracedGateway(receiver.endpoint, { batchDelayMs: 600_000, maxQueueSpans: 4096 })
    // Each request is a SERVER span and a CLIENT span: 511 requests leave the batch two short.
    for (let index = 0; index < 511; index++) expect((await send(gw.url, '/v4/anything', { headers: ALICE })).status).toBe(200)
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(receiver.requests).toHaveLength(0)
    expect((await send(gw.url, '/v4/anything', { headers: ALICE })).status).toBe(200)
    await until(() => receiver.requests.length === 1)
    expect(receiver.spans).toHaveLength(1024)
    expect(receiver.spans.filter((span) => span.kind === 'SERVER')).toHaveLength(512)
    await gw.close()
  })
})

describe('closing with more than one batch queued, one of them refused', () => {
  const upstream = useRecordingUpstream()

  // The SDK's processor stopped the exporter only when every batch of its last flush went out: a
  // refused one ended the flush at once, and the others still being sent were lost at the exit.
  it('waits within the grace period for the batches still being sent after one was refused', async () => {
    const accepted: number[] = []
    let first: (() => void) | undefined
    const collector = createServer((request, response) => {
      const chunks: Buffer[] = []
      request.on('data', (chunk: Buffer) => chunks.push(chunk))
      request.on('end', () => {
        const spans = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resourceSpans: { scopeSpans: { spans: unknown[] }[] }[] }).resourceSpans
          .flatMap((resource) => resource.scopeSpans.flatMap((scope) => scope.spans)).length
        const accept = (): void => {
          accepted.push(spans)
          response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
        }
        // The first full batch is held until closing has made the last batches, so they are two.
        if (first === undefined && accepted.length === 0) return void (first = accept)
        if (spans === 1024) {
          first?.()
          return void response.writeHead(400, { 'content-type': 'text/plain' }).end('refused')
        }
        setTimeout(accept, 300)
      })
    })
    const endpoint = `${await listenOnLoopback(collector)}/v1/traces`
    try {
      const gw = await startGateway(testConfig(upstream.url, {
        shutdown: { graceMs: 8_000 },
        tracing: { enabled: true, endpoint, protocol: 'http/json', sampleRatio: 1, batchDelayMs: 600_000, maxQueueSpans: 4096 }
      }))
      // 1,100 requests, 2,200 spans: one full batch sent (and held), then 1,176 queued, two batches at close.
      for (let round = 0; round < 55; round++) {
        const statuses = await Promise.all(Array.from({ length: 20 }, () => send(gw.url, '/v4/anything', { headers: ALICE }).then((answer) => answer.status)))
        expect(new Set(statuses)).toEqual(new Set([200]))
      }
      // The first full batch has reached the collector (the export thread may still be starting).
      await until(() => first !== undefined)
      await gw.close()
      expect(accepted).toEqual([1024, 152])
    } finally {
      collector.closeAllConnections()
      await new Promise((resolve) => collector.close(resolve))
    }
  })
})

describe('SIGTERM with spans queued', () => {
  const dir = useTempDir('v4gw-tracing-')
  const upstream = useRecordingUpstream()

  it('exports the queued spans before the process exits 0', async () => {
    const receiver = await startOtlpReceiver()
    const config = {
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      tenancy: { default: 'acme' },
      tenants: { acme: { upstream: { staging: upstream.url } } },
      // A batch would wait ten minutes: only the flush at SIGTERM sends these spans.
      tracing: { enabled: true, endpoint: receiver.endpoint, sampleRatio: 1, batchDelayMs: 600_000 }
    }
    const gateway = await spawnGateway(await dir.write('traced.yaml', stringify(config)))
    const answers = await Promise.all([
      send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } }),
      send(gateway.url, '/v4/anything', { headers: ALICE })
    ])
    expect(answers.map((answer) => answer.status)).toEqual([200, 200])
    expect(receiver.requests).toHaveLength(0)
    gateway.child.kill('SIGTERM')
    expect(await gateway.exited).toBe(0)
    expect(receiver.spans.filter((span) => span.kind === 'SERVER').map((span) => span.name).sort()).toEqual(['GET /v4/*', 'POST /v1/headless/runs'])
    expect(receiver.spans.filter((span) => span.kind === 'CLIENT')).toHaveLength(2)
  })
})

describe('an embedder closing a gateway whose collector never answers', () => {
  const upstream = useRecordingUpstream()

  it('lets go of the export at the end of the grace period: once close() has returned, nothing of tracing keeps the process alive', async () => {
    const receiver = await startOtlpReceiver({ kind: 'hang' })
    const dist = (path: string) => JSON.stringify(fileURLToPath(new URL(`../../dist/${path}`, import.meta.url)))
    // A grace period long enough for the export thread to start and send under a busy machine's load (CI).
    const config = testConfig(upstream.url, { shutdown: { graceMs: 4_000 }, tracing: { enabled: true, endpoint: receiver.endpoint, sampleRatio: 1, batchDelayMs: 600_000 } })
    // The embedder's own handles are gone once close() returns; the export's timeout (10 s) is
    // what would hold the process if the export thread were still held.
    const script = `
      process.exitCode = 3
      const { buildGateway } = await import(${dist('app.js')})
      const { configSchema } = await import(${dist('config/schema.js')})
      const { createLogger } = await import(${dist('observability/logger.js')})
      const { Writable } = await import('node:stream')
      const logger = createLogger({ level: 'silent', destination: new Writable({ write: (chunk, encoding, done) => done() }) })
      const gateway = await buildGateway({ config: configSchema.parse(${JSON.stringify(config)}), logger })
      const { trafficUrl } = await gateway.listen({ host: '127.0.0.1', trafficPort: 0, adminPort: 0 })
      const answer = await fetch(new URL('/v1/headless/runs', trafficUrl), { method: 'POST', headers: { authorization: 'Bearer demo-token-alice', 'content-type': 'application/json' }, body: '{"input":1}' })
      await answer.text()
      await gateway.close()
      process.exitCode = answer.status === 200 ? 0 : 4
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' })
    // Past the grace period, short of the export's own timeout (10 s from the flush at close).
    const killer = setTimeout(() => child.kill('SIGKILL'), 9_000)
    const exit = await new Promise<[number | null, string | null]>((resolve) => child.on('exit', (code, signal) => resolve([code, signal])))
    clearTimeout(killer)
    expect(exit).toEqual([0, null])
    // The flush did reach the collector, which held it.
    expect(receiver.held).toBe(1)
  })
})
