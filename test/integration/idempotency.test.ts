import { spawnSync } from 'node:child_process'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createConnection, createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { configSchema } from '../../src/config/schema.js'
import { deepFreeze } from '../../src/util/deep-freeze.js'
import { arrivalBarrier } from '../helpers/arrival-barrier.js'
import { answerJson, refusingOrigin, resetConnection, startFaultUpstream, type FaultExchange, type FaultUpstream } from '../helpers/fault-upstream.js'
import { send } from '../helpers/http.js'
import { expectGatewayError } from '../helpers/gateway-error.js'
import { startOtlpReceiver } from '../helpers/otlp-receiver.js'
import { useRedisServer } from '../helpers/redis-server.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { until, within } from '../helpers/until.js'

const TOKEN = 'tok-idem-secret-9f3a'
const AUTH = { authorization: `Bearer ${TOKEN}` }
const EXECUTE = '/v1/headless/runs'

/** A gateway whose tenant `acme` has SPEC 16 idempotency with `settings` over the defaults. */
function idempotentGateway(upstreamUrl: string, settings: Record<string, unknown> = {}, extra: Record<string, unknown> = {}, top: Record<string, unknown> = {}) {
  return startGateway(testConfig(upstreamUrl, { tenants: { acme: { upstream: { staging: upstreamUrl }, legacy: { idempotency: settings }, ...extra } }, ...top }))
}

/** The V4 execution calls that reached the upstream. */
function executions(upstream: FaultUpstream): FaultExchange[] {
  return upstream.exchanges.filter((exchange) => exchange.url === '/v4/execute' || exchange.url.endsWith('/executions.execute'))
}

function keyed(key: string, requestId?: string): Record<string, string> {
  return { ...AUTH, 'idempotency-key': key, ...(requestId === undefined ? {} : { 'x-request-id': requestId }) }
}

/** A loopback TCP server that does `onSocket` with each connection: an upstream that fails below HTTP. */
async function tcpOrigin(onSocket: (socket: Socket) => void): Promise<{ origin: string; connections: () => number; close: () => Promise<void> }> {
  let connections = 0
  const sockets = new Set<Socket>()
  const server: TcpServer = createTcpServer((socket) => {
    connections++
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket)).on('error', () => {})
    onSocket(socket)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address() as { port: number }
  return {
    origin: `127.0.0.1:${address.port}`,
    connections: () => connections,
    close: async () => {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

/**
 * Settles once the gateway has seen the client of the request sent with `headers` (its
 * idempotency-key, and its x-request-id if it has one) go away before its answer: that request's
 * response closed unfinished. Watch before the request is sent. This listener comes after the
 * kernel's own on the same 'close' (the kernel hooks it in the traffic server's first 'request'
 * listener), so by then the kernel has run its end for the request: marked it gone, cancelled what
 * its cancel scope holds, freed or kept its in-flight slot. It rejects if the request is answered
 * instead, or if its client is not seen to leave within 5 s.
 */
function clientLeft(gw: StartedGateway, headers: Record<string, string>): Promise<void> {
  const server = gw.gateway.trafficServer
  const matches = (request: IncomingMessage): boolean =>
    request.headers['idempotency-key'] === headers['idempotency-key'] && (headers['x-request-id'] === undefined || request.headers['x-request-id'] === headers['x-request-id'])
  const left = new Promise<void>((resolve, reject) => {
    const watch = (request: IncomingMessage, response: ServerResponse): void => {
      if (!matches(request)) return
      server.off('request', watch)
      response.once('close', () => (response.writableFinished ? reject(new Error('the gateway answered the request before its client left')) : resolve()))
    }
    server.on('request', watch)
  })
  const seen = within(left, 5_000, 'the gateway did not see the client leave within 5 s')
  // Awaited later (sendAndLeave awaits its upstream call first): a rejection before then is not reported as unhandled.
  seen.catch(() => undefined)
  return seen
}

/**
 * Sends a keyed request whose client leaves once its first upstream call has arrived, and resolves
 * with that call, held, once the gateway has seen the client go (its line will say 499): what
 * the test does next happens after the departure, not by luck of timing.
 */
async function sendAndLeave(gw: StartedGateway, upstream: FaultUpstream, path: string, headers: Record<string, string>, body: string): Promise<FaultExchange> {
  const left = clientLeft(gw, headers)
  const controller = new AbortController()
  const { request } = await import('undici')
  const sent = request(new URL(path, gw.url), { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body, signal: controller.signal }).catch(() => undefined)
  const held = await upstream.nextExchange()
  controller.abort()
  await sent
  await left
  return held
}

/**
 * Settles once the gateway's close() has shut its admin listener, the step right before it closes
 * the upstream pool (app/shutdown.ts): a call answered after this meets a closing pool, however
 * long the steps before took (the traffic listener's idle connections, the settle guard).
 */
async function adminClosed(gw: StartedGateway): Promise<void> {
  const { port } = new URL(gw.adminUrl)
  const refused = (): Promise<boolean> =>
    new Promise((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port: Number(port) })
      socket.once('connect', () => {
        socket.destroy()
        resolve(false)
      })
      socket.once('error', () => resolve(true))
    })
  await until(refused, 10_000, 10)
}

/** The access line of the request `requestId`, once it is written (a call whose client left writes it when the call ends). */
async function accessLine(gw: StartedGateway, requestId: string): Promise<Record<string, unknown>> {
  const find = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === requestId)
  await until(() => find() !== undefined)
  return find() as Record<string, unknown>
}

describe('SPEC 16 idempotency: a retry never runs a V4 execution twice', () => {
  it('replays a finished answer byte for byte with idempotent-replayed: true and the new x-request-id, sending nothing upstream', async () => {
    const upstream = await startFaultUpstream((exchange) => answerJson(exchange, 201, { output: 'ran', meta: { executionId: 'ex-1' } }))
    const gw = await idempotentGateway(upstream.url)
    const first = await send(gw.url, EXECUTE, { headers: keyed('k-1', 'first-id'), json: { input: 1 } })
    const retry = await send(gw.url, EXECUTE, { headers: keyed('k-1', 'retry-id'), json: { input: 1 } })
    expect(first.status).toBe(201)
    expect(first.headers['idempotent-replayed']).toBeUndefined()
    expect(retry.status).toBe(201)
    expect(retry.text).toBe(first.text)
    expect(retry.headers['idempotent-replayed']).toBe('true')
    expect(retry.headers['x-request-id']).toBe('retry-id')
    expect(retry.headers['content-type']).toBe(first.headers['content-type'])
    expect(executions(upstream)).toHaveLength(1)
  })

  it('renews a claim at most every 2^31-1 ms, however long the limits make its lease (Node runs a longer interval every 1 ms)', async () => {
    const warnings: Error[] = []
    const onWarning = (warning: Error): void => void warnings.push(warning)
    process.on('warning', onWarning)
    try {
      // The largest limits the config takes: a lease of 2 × (2^31-1 + 2^31-1) ms, a third of it past Node's timer range.
      const limits = { limits: { upstreamTimeoutMs: 2_147_483_647, connectTimeoutMs: 2_147_483_647 } }
      const upstream = await startFaultUpstream((exchange) => void setTimeout(() => answerJson(exchange, 200, { output: 'ran' }), 100))
      const gw = await idempotentGateway(upstream.url, {}, {}, limits)
      expect((await send(gw.url, EXECUTE, { headers: keyed('k-long-lease'), json: { input: 1 } })).status).toBe(200)
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings.map((warning) => warning.name)).not.toContain('TimeoutOverflowWarning')
    } finally {
      process.off('warning', onWarning)
    }
  })

  it('executes every request that carries no key, as before', async () => {
    const upstream = await startFaultUpstream()
    const gw = await idempotentGateway(upstream.url)
    await send(gw.url, EXECUTE, { headers: AUTH, json: { input: 1 } })
    await send(gw.url, EXECUTE, { headers: AUTH, json: { input: 1 } })
    expect(executions(upstream)).toHaveLength(2)
  })

  it('treats a key sent as an RFC 8941 string and the same key sent bare as one key', async () => {
    const upstream = await startFaultUpstream()
    const gw = await idempotentGateway(upstream.url)
    await send(gw.url, EXECUTE, { headers: keyed('"abc-1"'), json: { input: 1 } })
    const retry = await send(gw.url, EXECUTE, { headers: keyed('abc-1'), json: { input: 1 } })
    expect(retry.headers['idempotent-replayed']).toBe('true')
    expect(executions(upstream)).toHaveLength(1)
  })

  it('answers a retry that arrives while the first call runs with the first call\'s answer, once it has one, its outcome waited', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url)
    // The first call and the retry, each read whole by the gateway.
    const bothIn = arrivalBarrier(2)
    bothIn.watch([gw])
    const first = send(gw.url, EXECUTE, { headers: keyed('k-2'), json: { input: 1 } })
    const held = await upstream.nextExchange()
    const retry = send(gw.url, EXECUTE, { headers: keyed('k-2', 'retry-id'), json: { input: 1 } })
    // From its body's end the retry reaches its wait on the claim with no I/O between, while the
    // first call's answer needs a socket read: the retry waits for certain, not by luck of timing.
    await bothIn.arrived
    answerJson(held, 200, { output: 'once' })
    const [firstAnswer, retryAnswer] = await Promise.all([first, retry])
    expect(retryAnswer.status).toBe(200)
    expect(retryAnswer.text).toBe(firstAnswer.text)
    expect(retryAnswer.headers['idempotent-replayed']).toBe('true')
    expect(executions(upstream)).toHaveLength(1)
    // SPEC 16: a replay after waiting for the first call is `waited`, not `replayed`, on the line and the metric.
    const retryLine = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'retry-id')
    await until(() => retryLine() !== undefined)
    expect(retryLine()).toMatchObject({ status: 200, idempotency: 'waited' })
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/^v4gw_idempotency_total\{tenant="acme",route="POST \/v1\/headless\/runs",outcome="waited"\} 1$/m)
  })

  it('answers 409 IDEMPOTENCY_IN_PROGRESS with Retry-After: 1 when the first call outlasts waitMs, and never runs it twice', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url, { waitMs: 50 })
    const first = send(gw.url, EXECUTE, { headers: keyed('k-3'), json: { input: 1 } })
    const held = await upstream.nextExchange()
    const retry = await send(gw.url, EXECUTE, { headers: keyed('k-3', 'in-progress-id'), json: { input: 1 } })
    expectGatewayError(retry, 409, 'IDEMPOTENCY_IN_PROGRESS')
    expect(retry.headers['retry-after']).toBe('1')
    answerJson(held, 200, { output: 'once' })
    expect((await first).status).toBe(200)
    expect(executions(upstream)).toHaveLength(1)
    // It waited, but got no answer: `in_progress`, not `waited` (SPEC 16).
    const retryLine = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'in-progress-id')
    await until(() => retryLine() !== undefined)
    expect(retryLine()).toMatchObject({ status: 409, error: 'IDEMPOTENCY_IN_PROGRESS', idempotency: 'in_progress' })
  })

  it('answers 422 IDEMPOTENCY_KEY_REUSED, sending nothing, when the key comes again with another body', async () => {
    const upstream = await startFaultUpstream()
    const gw = await idempotentGateway(upstream.url)
    await send(gw.url, EXECUTE, { headers: keyed('k-4'), json: { input: 1 } })
    const reused = await send(gw.url, EXECUTE, { headers: keyed('k-4'), json: { input: 2 } })
    expectGatewayError(reused, 422, 'IDEMPOTENCY_KEY_REUSED')
    expect(executions(upstream)).toHaveLength(1)
  })

  it('answers 422 IDEMPOTENCY_KEY_REUSED while the first call still runs, without waiting for it', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url)
    const first = send(gw.url, EXECUTE, { headers: keyed('k-4b'), json: { input: 1 } })
    const held = await upstream.nextExchange()
    const reused = await send(gw.url, EXECUTE, { headers: keyed('k-4b'), json: { input: 2 } })
    expect(reused.status).toBe(422)
    answerJson(held, 200, { output: 'once' })
    await first
    expect(executions(upstream)).toHaveLength(1)
  })

  it('keeps a record per credential: the same key from another token is another request', async () => {
    const upstream = await startFaultUpstream()
    const gw = await idempotentGateway(upstream.url)
    await send(gw.url, EXECUTE, { headers: keyed('k-5'), json: { input: 1 } })
    const other = await send(gw.url, EXECUTE, { headers: { authorization: 'Bearer tok-other', 'idempotency-key': 'k-5' }, json: { input: 1 } })
    expect(other.headers['idempotent-replayed']).toBeUndefined()
    expect(executions(upstream)).toHaveLength(2)
  })

  it('keeps an upstream 5xx (the execution may have run): the retry gets it replayed', async () => {
    const upstream = await startFaultUpstream((exchange) => answerJson(exchange, 503, { error: 'busy' }))
    const gw = await idempotentGateway(upstream.url)
    const first = await send(gw.url, EXECUTE, { headers: keyed('k-6'), json: { input: 1 } })
    const retry = await send(gw.url, EXECUTE, { headers: keyed('k-6'), json: { input: 1 } })
    expect(first.status).toBe(503)
    expect(retry.status).toBe(503)
    expect(retry.text).toBe(first.text)
    expect(executions(upstream)).toHaveLength(1)
  })

  it('keeps the gateway\'s 504 UPSTREAM_TIMEOUT after the execution was sent, byte for byte', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url, {}, {}, { limits: { upstreamTimeoutMs: 200 } })
    const first = await send(gw.url, EXECUTE, { headers: keyed('k-7', 'first-id'), json: { input: 1 } })
    const retry = await send(gw.url, EXECUTE, { headers: keyed('k-7', 'retry-id'), json: { input: 1 } })
    // The first answer is the gateway's envelope, made by the keyed run's own writer.
    expectGatewayError(first, 504, 'UPSTREAM_TIMEOUT')
    expect(first.headers['x-request-id']).toBe('first-id')
    expect(retry.status).toBe(504)
    expect(retry.text).toBe(first.text)
    expect(retry.headers['idempotent-replayed']).toBe('true')
    expect(executions(upstream)).toHaveLength(1)
  })

  it('names the session on the kept 504 of a session-execute, and on its replay (SPEC 4 step 6)', async () => {
    const upstream = await startFaultUpstream((exchange) => {
      if (exchange.url === '/v4/sessions.start') answerJson(exchange, 201, { sessionId: 'sess-kept-504' })
    })
    const gw = await idempotentGateway(upstream.url, {}, {}, { limits: { upstreamTimeoutMs: 200 } })
    const first = await send(gw.url, '/v1/runs/invoke', { headers: keyed('k-7s', 'first-session-504'), json: { input: 1, stateId: 's-504' } })
    const retry = await send(gw.url, '/v1/runs/invoke', { headers: keyed('k-7s', 'retry-session-504'), json: { input: 1, stateId: 's-504' } })
    expectGatewayError(first, 504, 'UPSTREAM_TIMEOUT')
    expect(first.headers['x-v4-session-id']).toBe('sess-kept-504')
    expect(retry.headers['idempotent-replayed']).toBe('true')
    expect(retry.headers['x-v4-session-id']).toBe('sess-kept-504')
  })

  it('says the kept 504 is the gateway\'s own (SPEC 14 x-v4gw-served-by: gateway), as an unkeyed one does', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url, {}, { migration: { stage: 'translate' } }, { limits: { upstreamTimeoutMs: 200 }, log: { level: 'info' } })
    const unkeyed = await send(gw.url, EXECUTE, { headers: AUTH, json: { input: 1 } })
    const keyedFirst = await send(gw.url, EXECUTE, { headers: keyed('k-7b', 'keyed-first'), json: { input: 1 } })
    expect([unkeyed.status, keyedFirst.status]).toEqual([504, 504])
    expect(unkeyed.headers['x-v4gw-served-by']).toBe('gateway')
    expect(keyedFirst.headers['x-v4gw-served-by']).toBe('gateway')
    const accessLine = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'keyed-first')
    await until(() => accessLine() !== undefined)
    expect(accessLine()).toMatchObject({ servedBy: 'gateway', status: 504, idempotency: 'executed' })
  })

  it('keeps the 502 of a connection reset after the execution was sent', async () => {
    const upstream = await startFaultUpstream((exchange) => resetConnection(exchange))
    const gw = await idempotentGateway(upstream.url)
    const first = await send(gw.url, EXECUTE, { headers: keyed('k-8'), json: { input: 1 } })
    const retry = await send(gw.url, EXECUTE, { headers: keyed('k-8'), json: { input: 1 } })
    expect(first.status).toBe(502)
    expect(retry.status).toBe(502)
    expect(retry.headers['idempotent-replayed']).toBe('true')
    expect(executions(upstream)).toHaveLength(1)
  })

  it('keeps nothing when the connection was refused before the request was sent: the retry runs', async () => {
    const origin = await refusingOrigin()
    const gw = await idempotentGateway(origin)
    const refused = await send(gw.url, EXECUTE, { headers: keyed('k-9'), json: { input: 1 } })
    expect(refused.status).toBe(502)
    expect(refused.json.error.code).toBe('UPSTREAM_UNAVAILABLE')
    // The upstream comes up on the same port; the retry runs there, once.
    const seen: string[] = []
    const server: Server = createServer((request, response) => {
      seen.push(request.url ?? '')
      request.resume().on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{"output":"ran"}'))
    })
    await new Promise<void>((resolve) => server.listen(Number(new URL(origin).port), '127.0.0.1', resolve))
    try {
      const retry = await send(gw.url, EXECUTE, { headers: keyed('k-9'), json: { input: 1 } })
      expect(retry.status).toBe(200)
      expect(retry.headers['idempotent-replayed']).toBeUndefined()
      expect(seen).toEqual(['/v4/execute'])
    } finally {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })

  it('keeps nothing when the connection failed in its TLS handshake, before the request was sent: the retry runs', async () => {
    // An https upstream whose server hangs up on every connection: no request is ever written.
    const { origin, connections, close } = await tcpOrigin((socket) => socket.destroy())
    try {
      const gw = await idempotentGateway(`https://${origin}`)
      const first = await send(gw.url, EXECUTE, { headers: keyed('k-tls'), json: { input: 1 } })
      expect(first.status).toBe(502)
      expect(first.json.error.code).toBe('UPSTREAM_UNAVAILABLE')
      const retry = await send(gw.url, EXECUTE, { headers: keyed('k-tls'), json: { input: 1 } })
      expect(retry.status).toBe(502)
      // Run again, not replayed: SPEC 16 keeps no answer of a call that never went out.
      expect(retry.headers['idempotent-replayed']).toBeUndefined()
      expect(connections()).toBe(2)
    } finally {
      await close()
    }
  })

  it('keeps nothing when sessions.start was refused (no execution sent): the retry runs, and executes once', async () => {
    let starts = 0
    const upstream = await startFaultUpstream((exchange) => {
      if (exchange.url === '/v4/sessions.start') {
        starts++
        if (starts === 1) answerJson(exchange, 503, { error: 'start failed' })
        else answerJson(exchange, 200, { sessionId: 'sess-1' })
      } else answerJson(exchange, 200, { output: 'ran' })
    })
    const gw = await idempotentGateway(upstream.url)
    const body = { input: 1, stateId: 'st-1' }
    const first = await send(gw.url, '/v1/runs/invoke', { headers: keyed('k-10'), json: body })
    expect(first.status).toBe(503)
    const retry = await send(gw.url, '/v1/runs/invoke', { headers: keyed('k-10'), json: body })
    expect(retry.status).toBe(200)
    expect(retry.headers['x-v4-session-id']).toBe('sess-1')
    const again = await send(gw.url, '/v1/runs/invoke', { headers: keyed('k-10'), json: body })
    expect(again.headers['idempotent-replayed']).toBe('true')
    expect(again.headers['x-v4-session-id']).toBe('sess-1')
    expect(again.text).toBe(retry.text)
    expect(executions(upstream)).toHaveLength(1)
  })

  it('keeps nothing when the session was stale and its new sessions.start failed: V4 knew no session, so nothing ran; the retry runs, and executes once', async () => {
    let starts = 0
    const upstream = await startFaultUpstream((exchange) => {
      if (exchange.url === '/v4/sessions.start') {
        starts++
        // The first start maps the state's session; the one after the stale answer fails; the retry's succeeds.
        if (starts === 2) answerJson(exchange, 503, { error: 'start failed' })
        else answerJson(exchange, 200, { sessionId: `sess-${starts}` })
      } else if (exchange.url === '/v4/sessions/sess-1/executions.execute' && executions(upstream).length > 1) answerJson(exchange, 404, { error: { code: 'SESSION_NOT_FOUND' } })
      else answerJson(exchange, 200, { output: 'ran' })
    })
    const gw = await idempotentGateway(upstream.url, {}, {}, { log: { level: 'info' } })
    const body = { input: 1, stateId: 'st-stale' }
    expect((await send(gw.url, '/v1/runs/invoke', { headers: keyed('k-map-stale'), json: body })).status).toBe(200)
    const first = await send(gw.url, '/v1/runs/invoke', { headers: keyed('k-stale', 'stale-first'), json: body })
    expect(first.status).toBe(503)
    const retry = await send(gw.url, '/v1/runs/invoke', { headers: keyed('k-stale'), json: body })
    expect(retry.status).toBe(200)
    expect(retry.headers['idempotent-replayed']).toBeUndefined()
    expect(retry.headers['x-v4-session-id']).toBe('sess-3')
    expect(executions(upstream).map((exchange) => exchange.url)).toEqual([
      '/v4/sessions/sess-1/executions.execute',
      '/v4/sessions/sess-1/executions.execute',
      '/v4/sessions/sess-3/executions.execute'
    ])
    const line = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'stale-first')
    await until(() => line() !== undefined)
    expect(line()).toMatchObject({ status: 503, session: 'stale-retry', idempotency: 'not_kept' })
  })

  it('replays a kept answer the gateway made as the gateway\'s (x-v4gw-served-by, the access line\'s servedBy), and one V4 made as V4\'s', async () => {
    let calls = 0
    // The first execution never answers (the gateway's 504); the second answers 200.
    const upstream = await startFaultUpstream((exchange) => {
      if (++calls > 1) answerJson(exchange, 200, { output: 'ran' })
    })
    const gw = await idempotentGateway(upstream.url, {}, { migration: { stage: 'translate' } }, { limits: { upstreamTimeoutMs: 200 }, log: { level: 'info' } })
    const timedOut = await send(gw.url, EXECUTE, { headers: keyed('k-made', 'made-first'), json: { input: 1 } })
    const replayedTimeout = await send(gw.url, EXECUTE, { headers: keyed('k-made', 'made-replay'), json: { input: 1 } })
    const ran = await send(gw.url, EXECUTE, { headers: keyed('k-v4', 'v4-first'), json: { input: 2 } })
    const replayedRun = await send(gw.url, EXECUTE, { headers: keyed('k-v4', 'v4-replay'), json: { input: 2 } })
    expect([timedOut.status, replayedTimeout.status, ran.status, replayedRun.status]).toEqual([504, 504, 200, 200])
    expect(replayedTimeout.headers['idempotent-replayed']).toBe('true')
    expect(replayedTimeout.headers['x-v4gw-served-by']).toBe('gateway')
    expect(replayedRun.headers['idempotent-replayed']).toBe('true')
    expect(replayedRun.headers['x-v4gw-served-by']).toBe('v4')
    const servedBy = (requestId: string) => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === requestId)?.servedBy
    await until(() => servedBy('v4-replay') !== undefined)
    expect(['made-first', 'made-replay', 'v4-first', 'v4-replay'].map(servedBy)).toEqual(['gateway', 'gateway', 'v4', 'v4'])
    expect(executions(upstream)).toHaveLength(2)
  })

  it('replays with the deprecation headers of the config running at the replay, not those of the first call', async () => {
    const upstream = await startFaultUpstream((exchange) => answerJson(exchange, 200, { output: 'ran' }))
    const deprecated = (sunset: string, link: string) =>
      testConfig(upstream.url, { tenants: { acme: { upstream: { staging: upstream.url }, legacy: { idempotency: {}, deprecation: { date: '2026-01-01T00:00:00Z', sunset, link } } } } })
    const gw = await startGateway(deprecated('2027-06-01T00:00:00Z', 'https://example.com/first-guide'))
    const first = await send(gw.url, EXECUTE, { headers: keyed('k-dep'), json: { input: 1 } })
    await gw.gateway.applyConfig(deepFreeze(configSchema.parse(deprecated('2027-09-01T00:00:00Z', 'https://example.com/second-guide'))))
    const retry = await send(gw.url, EXECUTE, { headers: keyed('k-dep'), json: { input: 1 } })
    // What any request gets from the config running now.
    const now = await send(gw.url, EXECUTE, { headers: AUTH, json: { input: 2 } })
    expect(retry.headers['idempotent-replayed']).toBe('true')
    expect(retry.text).toBe(first.text)
    expect(first.headers.sunset).not.toBe(now.headers.sunset)
    for (const header of ['deprecation', 'sunset', 'link']) expect(retry.headers[header]).toBe(now.headers[header])
    expect(retry.headers.link).toContain('second-guide')
    expect(executions(upstream)).toHaveLength(2)
  })

  it('keeps a record without its body for an answer over maxBodyBytes: the retry gets 409 IDEMPOTENCY_RESULT_TOO_LARGE and never runs', async () => {
    const upstream = await startFaultUpstream((exchange) => answerJson(exchange, 200, { output: 'x'.repeat(500) }))
    const gw = await idempotentGateway(upstream.url, { maxBodyBytes: 100 })
    const first = await send(gw.url, EXECUTE, { headers: keyed('k-11'), json: { input: 1 } })
    expect(first.json.output).toHaveLength(500)
    const retry = await send(gw.url, EXECUTE, { headers: keyed('k-11', 'too-large-id'), json: { input: 1 } })
    expectGatewayError(retry, 409, 'IDEMPOTENCY_RESULT_TOO_LARGE')
    expect(executions(upstream)).toHaveLength(1)
    // A record without its body is no replay: the line and the metric say `too_large` (SPEC 16).
    const retryLine = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'too-large-id')
    await until(() => retryLine() !== undefined)
    expect(retryLine()).toMatchObject({ status: 409, idempotency: 'too_large' })
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/^v4gw_idempotency_total\{tenant="acme",route="POST \/v1\/headless\/runs",outcome="too_large"\} 1$/m)
  })

  it('answers 400 INVALID_REQUEST naming the header for a key that is not 1-255 visible ASCII characters, sending nothing', async () => {
    const upstream = await startFaultUpstream()
    const gw = await idempotentGateway(upstream.url)
    for (const key of ['has space', 'x'.repeat(256), '""']) {
      const answer = await send(gw.url, EXECUTE, { headers: keyed(key), json: { input: 1 } })
      expect(answer.status).toBe(400)
      expect(answer.json.error.code).toBe('INVALID_REQUEST')
      expect(answer.json.error.details).toEqual([{ pointer: 'header:idempotency-key', message: expect.any(String) }])
    }
    expect(upstream.exchanges).toHaveLength(0)
  })

  it('passes a key on a native /v4 route through untouched: no record, every call runs (SPEC 16 is for translated routes)', async () => {
    const upstream = await startFaultUpstream()
    const gw = await idempotentGateway(upstream.url)
    await send(gw.url, '/v4/execute', { headers: keyed('k-12'), json: { input: 1 } })
    const second = await send(gw.url, '/v4/execute', { headers: keyed('k-12'), json: { input: 1 } })
    expect(second.headers['idempotent-replayed']).toBeUndefined()
    expect(upstream.exchanges.map((exchange) => exchange.headers['idempotency-key'])).toEqual(['k-12', 'k-12'])
  })

  it('sends the key on to V4 in forwardHeader when set, and not otherwise', async () => {
    const upstream = await startFaultUpstream()
    const gw = await idempotentGateway(upstream.url, { forwardHeader: 'X-Dedup-Key' })
    await send(gw.url, EXECUTE, { headers: keyed('"k-13"'), json: { input: 1 } })
    expect(upstream.exchanges[0]?.headers['x-dedup-key']).toBe('k-13')
    expect(upstream.exchanges[0]?.headers['idempotency-key']).toBeUndefined()
  })

  it('sends the key in forwardHeader on the execution only, not on the sessions.start that other keys share', async () => {
    const upstream = await startFaultUpstream((exchange) => {
      if (exchange.url === '/v4/sessions.start') answerJson(exchange, 200, { sessionId: 'sess-13' })
      else answerJson(exchange, 200, { output: 'ran' })
    })
    const gw = await idempotentGateway(upstream.url, { forwardHeader: 'X-Dedup-Key' })
    expect((await send(gw.url, '/v1/runs/invoke', { headers: keyed('k-13b'), json: { input: 1, stateId: 'st-13' } })).status).toBe(200)
    expect(upstream.exchanges.map((exchange) => [exchange.url, exchange.headers['x-dedup-key']])).toEqual([
      ['/v4/sessions.start', undefined],
      ['/v4/sessions/sess-13/executions.execute', 'k-13b']
    ])
  })

  it('is off for a route whose migration.routes entry sets idempotency: null', async () => {
    const upstream = await startFaultUpstream()
    const gw = await idempotentGateway(upstream.url, {}, { migration: { routes: { 'POST /v1/headless/runs': { idempotency: null } } } })
    await send(gw.url, EXECUTE, { headers: keyed('k-14'), json: { input: 1 } })
    await send(gw.url, EXECUTE, { headers: keyed('k-14'), json: { input: 1 } })
    expect(executions(upstream)).toHaveLength(2)
  })

  it('finishes the first call when its client gives up, so that the retry gets its answer without a second execution', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url)
    const held = await sendAndLeave(gw, upstream, EXECUTE, keyed('k-15', 'gave-up'), '{"input":1}')
    // The gateway has seen the client go: the execution is answered only now.
    answerJson(held, 200, { output: 'finished' })
    // Its line comes when the call ends, after its answer was kept: the client had left (499), the call ran on and was kept.
    expect(await accessLine(gw, 'gave-up')).toMatchObject({ status: 499, idempotency: 'executed' })
    const retry = await send(gw.url, EXECUTE, { headers: keyed('k-15', 'after-give-up'), json: { input: 1 } })
    expect(retry.json.output).toBe('finished')
    expect(retry.headers['idempotent-replayed']).toBe('true')
    expect(executions(upstream)).toHaveLength(1)
    // The answer was there when it came: a replay, with no wait.
    expect(await accessLine(gw, 'after-give-up')).toMatchObject({ status: 200, idempotency: 'replayed' })
  })

  it('logs and counts a call its client gave up on when the call ends: its timeout is an upstream failure (SPEC 17)', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url, {}, {}, { limits: { upstreamTimeoutMs: 400 } })
    await sendAndLeave(gw, upstream, EXECUTE, keyed('k-late', 'late-failure'), '{"input":1}')
    // The execution times out after its client left: the line comes then, with what the call came to.
    await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.requestId === 'late-failure'))
    expect(gw.logs.lines().find((line) => line.msg === 'request' && line.requestId === 'late-failure')).toMatchObject({ status: 499, error: 'UPSTREAM_TIMEOUT', cause: 'timeout', idempotency: 'executed' })
    const metrics = (await send(gw.adminUrl, '/metrics')).text
    expect(metrics).toContain('v4gw_upstream_failures_total{tenant="acme",upstream="v4",cause="timeout"} 1')
    expect(metrics).toMatch(/^v4gw_idempotency_total\{tenant="acme",route="POST \/v1\/headless\/runs",outcome="executed"\} 1$/m)
    // The kept answer is the retry's (SPEC 16: a timeout is kept).
    const retry = await send(gw.url, EXECUTE, { headers: keyed('k-late'), json: { input: 1 } })
    expect(retry.status).toBe(504)
    expect(retry.headers['idempotent-replayed']).toBe('true')
  })

  it('logs the error a keyed call its client gave up on ends with, when it is not kept (SPEC 16, 17)', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url)
    const start = await sendAndLeave(gw, upstream, '/v1/runs/invoke', keyed('k-start', 'late-start'), '{"input":1,"stateId":"late"}')
    expect(start.url).toBe('/v4/sessions.start')
    // The start fails after the client left (sendAndLeave returns once the gateway has seen it go): no execution was sent, so nothing is kept, and the error is thrown.
    resetConnection(start)
    await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.requestId === 'late-start'))
    expect(gw.logs.lines().find((line) => line.msg === 'request' && line.requestId === 'late-start')).toMatchObject({ status: 499, error: 'UPSTREAM_UNAVAILABLE', cause: 'reset', idempotency: 'not_kept' })
    // The access line is the only line of it at info (SPEC 17).
    expect(gw.logs.lines().filter((line) => line.requestId === 'late-start').map((line) => line.msg)).toEqual(['request'])
    expect((await send(gw.adminUrl, '/metrics')).text).toContain('v4gw_upstream_failures_total{tenant="acme",upstream="v4",cause="reset"} 1')
  })

  it('holds the in-flight slot (SPEC 10) of a call its client gave up on until the call ends', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url, {}, {}, { limits: { maxInFlight: 1, upstreamTimeoutMs: 3_000 } })
    // Returns once the kernel has ended the client's side of it (its response closed unanswered).
    const held = await sendAndLeave(gw, upstream, EXECUTE, keyed('k-slot', 'slot-held'), '{"input":1}')
    // The execution still runs: a new request would make two, over the limit. The gauge says so (SPEC 17).
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/^v4gw_requests_in_flight 1$/m)
    const shed = await send(gw.url, EXECUTE, { headers: keyed('k-other'), json: { input: 2 } })
    expect(shed.status).toBe(503)
    expect(shed.json.error.code).toBe('OVERLOADED')
    answerJson(held, 200, { output: 'finished' })
    // The call's end: its line is written as its slot is freed, with what it came to.
    expect(await accessLine(gw, 'slot-held')).toMatchObject({ status: 499, idempotency: 'executed' })
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/^v4gw_requests_in_flight 0$/m)
    upstream.setHandler((exchange) => answerJson(exchange, 200, { output: 'next' }))
    expect((await send(gw.url, EXECUTE, { headers: keyed('k-after'), json: { input: 3 } })).status).toBe(200)
  })

  it('frees the in-flight slot (SPEC 10) of a duplicate whose client leaves while it waits for the first call', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url, { waitMs: 10_000 }, {}, { limits: { maxInFlight: 2, upstreamTimeoutMs: 5_000 } })
    const { request } = await import('undici')
    // The first call and the duplicate, each read whole by the gateway.
    const bothIn = arrivalBarrier(2)
    bothIn.watch([gw])
    const first = send(gw.url, EXECUTE, { headers: keyed('k-dup'), json: { input: 1 } })
    const held = await upstream.nextExchange()
    upstream.setHandler((exchange) => answerJson(exchange, 200, { output: 'other' }))
    const duplicateHeaders = keyed('k-dup', 'dup-left')
    const left = clientLeft(gw, duplicateHeaders)
    const controller = new AbortController()
    const duplicate = request(new URL(EXECUTE, gw.url), { method: 'POST', headers: { ...duplicateHeaders, 'content-type': 'application/json' }, body: '{"input":1}', signal: controller.signal }).catch(() => undefined)
    // From its body's end the duplicate reaches its wait on the first call's claim with no I/O
    // between (store: memory), while its client's leaving needs a socket read: it leaves while it
    // waits for certain, not by luck of timing. It holds a slot meanwhile.
    await bothIn.arrived
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/^v4gw_requests_in_flight 2$/m)
    controller.abort()
    await duplicate
    await left
    // Its slot is free at once, not after waitMs (10 s): only the first call holds one, and a third request is served beside it.
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/^v4gw_requests_in_flight 1$/m)
    expect((await send(gw.url, EXECUTE, { headers: keyed('k-third'), json: { input: 3 } })).status).toBe(200)
    // Its line: it left while the first call ran (SPEC 16 `in_progress`), and no call of its own failed.
    const line = await accessLine(gw, 'dup-left')
    expect(line).toMatchObject({ status: 499, idempotency: 'in_progress' })
    expect(line.error).toBeUndefined()
    answerJson(held, 200, { output: 'finished' })
    expect((await first).json.output).toBe('finished')
    expect(executions(upstream)).toHaveLength(2)
  })

  it('never writes the token or the key into a log line', async () => {
    const upstream = await startFaultUpstream()
    // At trace, every line the gateway can write is written.
    const gw = await idempotentGateway(upstream.url, {}, {}, { log: { level: 'trace' } })
    expect((await send(gw.url, EXECUTE, { headers: keyed('key-secret-77e1', 'secret-key-first'), json: { input: 1 } })).status).toBe(200)
    expect((await send(gw.url, EXECUTE, { headers: keyed('key-secret-77e1', 'secret-key-reused'), json: { input: 2 } })).status).toBe(422)
    for (const requestId of ['secret-key-first', 'secret-key-reused']) await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.requestId === requestId))
    const text = gw.logs.text()
    expect(text).not.toContain(TOKEN)
    expect(text).not.toContain('key-secret-77e1')
  })
})

// SPEC 16's fingerprint reads the route's parameters as text: one that is not UTF-8 (its raw
// text `%FF`) could meet another request's decoded one (`%25FF` is `%FF`) and replay its answer.
describe('SPEC 16 and a path parameter that is not UTF-8', () => {
  it('refuses a keyed request with 400 (nothing sent), and lets the same request without a key go on', async () => {
    const upstream = await startFaultUpstream((exchange) => answerJson(exchange, 200, { output: 'ran' }))
    const gw = await idempotentGateway(upstream.url, {}, { legacy: { idempotency: {}, routes: [{ method: 'POST', path: '/v0/jobs/:id', action: 'execute' }] } })
    const keyedAnswer = await send(gw.url, '/v0/jobs/%FF', { headers: keyed('raw-param-key'), json: { input: 1 } })
    expectGatewayError(keyedAnswer, 400, 'INVALID_REQUEST')
    expect(keyedAnswer.json.error.message).toContain(':id')
    expect(executions(upstream)).toHaveLength(0)
    expect((await send(gw.url, '/v0/jobs/%FF', { headers: AUTH, json: { input: 1 } })).status).toBe(200)
    expect((await send(gw.url, '/v0/jobs/%25FF', { headers: keyed('raw-param-key'), json: { input: 1 } })).headers['idempotent-replayed']).toBeUndefined()
  })
})

describe('SPEC 16 outcomes on the access line and in v4gw_idempotency_total (SPEC 17)', () => {
  it('names each outcome on the request\'s access line and counts it by tenant, route and outcome, promtool clean', async () => {
    const upstream = await startFaultUpstream((exchange) => answerJson(exchange, 200, { output: 'ran' }))
    const gw = await idempotentGateway(upstream.url)
    await send(gw.url, EXECUTE, { headers: keyed('m-1', 'line-executed'), json: { input: 1 } })
    await send(gw.url, EXECUTE, { headers: keyed('m-1', 'line-replayed'), json: { input: 1 } })
    await send(gw.url, EXECUTE, { headers: keyed('m-1', 'line-reused'), json: { input: 2 } })
    await send(gw.url, EXECUTE, { headers: { ...AUTH, 'x-request-id': 'line-unkeyed' }, json: { input: 1 } })
    await until(() => gw.logs.lines().filter((line) => line.msg === 'request').length === 4)
    const outcomes = Object.fromEntries(gw.logs.lines().filter((line) => line.msg === 'request').map((line) => [line.requestId, line.idempotency]))
    expect(outcomes).toEqual({ 'line-executed': 'executed', 'line-replayed': 'replayed', 'line-reused': 'key_reused', 'line-unkeyed': undefined })
    const text = (await send(gw.adminUrl, '/metrics')).text
    const series = (outcome: string) => text.split('\n').find((line) => line.startsWith(`v4gw_idempotency_total{tenant="acme",route="POST /v1/headless/runs",outcome="${outcome}"} `))
    expect(series('executed')).toMatch(/ 1$/)
    expect(series('replayed')).toMatch(/ 1$/)
    expect(series('key_reused')).toMatch(/ 1$/)
    expect(text).not.toContain('m-1')
    const checked = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
    expect(checked.error, 'promtool is not installed').toBeUndefined()
    expect(`${checked.stdout}${checked.stderr}`).toBe('')
  })
})

/**
 * A keyed call its client gave up on ends within the grace period, its answer kept, its line
 * written and its span exported before the gateway closes (SPEC 9, 16, 17); `store` may make keeping
 * the answer a round trip.
 */
async function keyedCallAtClose(top: Record<string, unknown>): Promise<void> {
  const receiver = await startOtlpReceiver()
  const upstream = await startFaultUpstream(() => {})
  // Spans leave only when the gateway closes (the batch delay outlasts the test).
  const gw = await idempotentGateway(upstream.url, {}, {}, { ...top, shutdown: { graceMs: 5_000 }, tracing: { enabled: true, endpoint: receiver.endpoint, sampleRatio: 1, batchDelayMs: 600_000 } })
  const held = await sendAndLeave(gw, upstream, EXECUTE, keyed('k-closing', 'keyed-at-close'), '{"input":1}')
  const closing = gw.close()
  // The call ends past the first wait for requests to settle (1 s), within the grace period.
  setTimeout(() => answerJson(held, 200, { output: 'finished' }), 1_500)
  await closing
  expect(gw.logs.lines().find((line) => line.msg === 'request' && line.requestId === 'keyed-at-close')).toMatchObject({ status: 499, idempotency: 'executed' })
  expect(receiver.spans.filter((span) => span.kind === 'SERVER' && span.name === 'POST /v1/headless/runs')).toHaveLength(1)
}

describe('SPEC 16 keyed calls that outlive their client, at shutdown', () => {
  const redis = useRedisServer()

  it('ends one within the grace period, logged and its span exported, with store: memory', () => keyedCallAtClose({}))

  it('ends one within the grace period, logged and its span exported, with store: redis (keeping the answer is a round trip)', () =>
    keyedCallAtClose({ store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'v4gw-keyed-close:' } } }))

  it('deletes, at a close that ends before the grace period, the claim of one still waiting on another replica\'s start (no execution sent)', async () => {
    const prefix = 'v4gw-keyed-close-waiting:'
    const store = { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: prefix } } }
    const upstream = await startFaultUpstream(() => {})
    const [starter, waiter] = [await idempotentGateway(upstream.url, {}, {}, store), await idempotentGateway(upstream.url, {}, {}, store)]
    // The starter holds the state's start lock: its sessions.start gets no answer.
    const starting = send(starter.url, '/v1/runs/invoke', { headers: AUTH, json: { input: 1, stateId: 'held-by-the-other' } }).catch(() => undefined)
    const start = await upstream.nextExchange()
    expect(start.url).toBe('/v4/sessions.start')
    // The waiter's keyed request claims its key, then waits on that lock; its client leaves.
    const headers = keyed('k-waits-on-lock', 'waits-on-lock')
    const left = clientLeft(waiter, headers)
    const controller = new AbortController()
    const { request } = await import('undici')
    const sent = request(new URL('/v1/runs/invoke', waiter.url), { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: '{"input":2,"stateId":"held-by-the-other"}', signal: controller.signal }).catch(() => undefined)
    await until(async () => (await redis.client().keys(`${prefix}i:*`)).length === 1)
    controller.abort()
    await sent
    await left
    // No call of its own in flight: the pool closes at once, and the close ends after its guards.
    await waiter.close()
    // SPEC 16: cut at shutdown with no execution sent, its claim is deleted (a retry runs at once),
    // not left to its lease (every retry a 409 for up to a minute).
    expect(await redis.client().keys(`${prefix}i:*`)).toEqual([])
    expect(executions(upstream)).toHaveLength(0)
    upstream.setHandler((exchange) => answerJson(exchange, 200, { output: 'ran' }))
    answerJson(start, 200, { sessionId: 'sess-held' })
    await starting
  }, 30_000)

  it('keeps nothing of one whose execution would go out after the pool closed: never sent, its claim deleted, no upstream failure', async () => {
    const prefix = 'v4gw-keyed-not-sent:'
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url, {}, {}, { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: prefix } }, shutdown: { graceMs: 5_000 } })
    const start = await sendAndLeave(gw, upstream, '/v1/runs/invoke', keyed('k-not-sent', 'not-sent'), '{"input":1,"stateId":"late"}')
    expect(start.url).toBe('/v4/sessions.start')
    const closing = gw.close()
    // The start answers once the pool is closing (close() shuts the admin listener just before it).
    void adminClosed(gw).then(() => answerJson(start, 200, { sessionId: 'sess-late' }))
    await closing
    expect(executions(upstream)).toHaveLength(0)
    // SPEC 16: no execution call was sent, so the claim is deleted and a retry on any replica runs it.
    expect(await redis.client().keys(`${prefix}i:*`)).toEqual([])
    // The gateway's own shutdown, not an upstream failure (SPEC 17): no cause on the line.
    const line = gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'not-sent')
    expect(line).toMatchObject({ status: 499, error: 'SHUTTING_DOWN', idempotency: 'not_kept' })
    expect(line).not.toHaveProperty('cause')
  })

  it('deletes the claim of one whose stale session\'s new sessions.start met the closed pool: V4 knew no session, nothing ran, and the retry runs', async () => {
    const prefix = 'v4gw-keyed-cut-after-stale:'
    const store = { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: prefix } } }
    let starts = 0
    const upstream = await startFaultUpstream((exchange) => {
      if (exchange.url === '/v4/sessions.start') answerJson(exchange, 200, { sessionId: `sess-${++starts}` })
    })
    const gw = await idempotentGateway(upstream.url, {}, {}, { ...store, shutdown: { graceMs: 5_000 } })
    // The state's session is mapped by a first request (its execution answered at once).
    const mapping = send(gw.url, '/v1/runs/invoke', { headers: keyed('k-map'), json: { input: 1, stateId: 'st-cut' } })
    await until(() => executions(upstream).length === 1)
    answerJson(executions(upstream)[0] as FaultExchange, 200, { output: 'ran' })
    expect((await mapping).status).toBe(200)
    const mappingRecord = await redis.client().keys(`${prefix}i:*`)
    expect(mappingRecord).toHaveLength(1)
    const held = await sendAndLeave(gw, upstream, '/v1/runs/invoke', keyed('k-cut', 'cut-after-stale'), '{"input":2,"stateId":"st-cut"}')
    expect(held.url).toBe('/v4/sessions/sess-1/executions.execute')
    const closing = gw.close()
    // Once the pool is closing (the admin listener goes just before it), the stale answer's new sessions.start cannot go.
    void adminClosed(gw).then(() => answerJson(held, 404, { error: 'no such session' }))
    await closing
    expect(starts).toBe(1)
    const line = gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'cut-after-stale')
    expect(line).toMatchObject({ error: 'SHUTTING_DOWN', idempotency: 'not_kept' })
    // SPEC 16: the one execution sent did not run (its session was unknown), so the claim is gone and a retry elsewhere runs it.
    expect(await redis.client().keys(`${prefix}i:*`)).toEqual(mappingRecord)
    const other = await idempotentGateway(upstream.url, { waitMs: 100 }, {}, store)
    const retry = send(other.url, '/v1/runs/invoke', { headers: keyed('k-cut'), json: { input: 2, stateId: 'st-cut' } })
    await until(() => executions(upstream).length === 3)
    answerJson(executions(upstream)[2] as FaultExchange, 200, { output: 'ran once' })
    expect((await retry).status).toBe(200)
    expect((await retry).headers['idempotent-replayed']).toBeUndefined()
  })

  it('logs one whose execution the grace period\'s end cut as the gateway\'s shutdown (SHUTTING_DOWN), not an upstream failure', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url, {}, {}, { shutdown: { graceMs: 5_000 } })
    const held = await sendAndLeave(gw, upstream, EXECUTE, keyed('k-cut-sent', 'cut-sent'), '{"input":1}')
    expect(held.url).toBe('/v4/execute')
    const closing = gw.close()
    gw.gateway.cutRemaining()
    await closing
    const line = gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'cut-sent')
    expect(line).toMatchObject({ status: 499, error: 'SHUTTING_DOWN', idempotency: 'executed' })
    expect(line).not.toHaveProperty('cause')
    expect(await gw.gateway.metrics.registry.metrics()).not.toMatch(/^v4gw_upstream_failures_total\{/m)
  })

  it('deletes the claim of one whose execution was still connecting when the grace period ended: nothing was sent', async () => {
    const prefix = 'v4gw-keyed-connecting:'
    // An https upstream that accepts and never answers the TLS handshake: the call stays connecting.
    const { origin, connections, close } = await tcpOrigin(() => {})
    try {
      const gw = await idempotentGateway(`https://${origin}`, {}, {}, { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: prefix } }, limits: { connectTimeoutMs: 10_000 } })
      const answer = send(gw.url, EXECUTE, { headers: keyed('k-connecting'), json: { input: 1 } }).catch(() => undefined)
      await until(() => connections() === 1)
      expect(await redis.client().keys(`${prefix}i:*`)).toHaveLength(1)
      const closing = gw.close()
      // The grace period ends (main.ts cuts what remains then) while the call still connects.
      gw.gateway.cutRemaining()
      await closing
      await answer
      expect(await redis.client().keys(`${prefix}i:*`)).toEqual([])
    } finally {
      await close()
    }
  })
})

describe('SPEC 16 claims on a shared store', () => {
  const redis = useRedisServer()

  it('renews the claim while a call outlives its lease: a retry on another replica then waits and is 409, never a second execution', async () => {
    const store = { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'v4gw-keyed-renewal:' } } }
    // A lease of 2 × (500 + 100) ms, renewed every 400 ms; the answer trickles a byte every 200 ms
    // (each inside the 500 ms body timeout) for 3 s, so the call lives well past one lease.
    const limits = { limits: { upstreamTimeoutMs: 500, connectTimeoutMs: 100 } }
    let trickled = 0
    const upstream = await startFaultUpstream((exchange) => {
      exchange.response.writeHead(200, { 'content-type': 'application/json' })
      exchange.response.write('{"output":"ran"')
      const timer = setInterval(() => {
        if (++trickled < 15) exchange.response.write(' ')
        else {
          clearInterval(timer)
          exchange.response.end('}')
        }
      }, 200)
    })
    const gw = await idempotentGateway(upstream.url, {}, {}, { ...store, ...limits })
    const other = await idempotentGateway(upstream.url, { waitMs: 100 }, {}, { ...store, ...limits })
    const first = send(gw.url, EXECUTE, { headers: keyed('k-renewed'), json: { input: 1 } })
    // 2 s into the answer: past the first lease (1.2 s) by far, so only a renewed claim still holds.
    await until(() => trickled >= 10, 10_000)
    const retry = await send(other.url, EXECUTE, { headers: keyed('k-renewed'), json: { input: 1 } })
    expect(retry.status).toBe(409)
    expect(retry.json.error.code).toBe('IDEMPOTENCY_IN_PROGRESS')
    expect((await first).status).toBe(200)
    const replay = await send(other.url, EXECUTE, { headers: keyed('k-renewed'), json: { input: 1 } })
    expect(replay.headers['idempotent-replayed']).toBe('true')
    expect(executions(upstream)).toHaveLength(1)
  })

  it('keeps a duplicate waiting on another replica\'s running request through a look the store fails while up: one execution, replayed', async () => {
    const store = { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'v4gw-keyed-failed-look:' } } }
    const upstream = await startFaultUpstream(() => {})
    const gw = await idempotentGateway(upstream.url, {}, {}, store)
    const other = await idempotentGateway(upstream.url, { waitMs: 10_000 }, {}, store)
    const first = send(gw.url, EXECUTE, { headers: keyed('k-failed-look'), json: { input: 1 } })
    const held = await upstream.nextExchange()
    // A second execution, if one is sent, is answered at once (so the test fails on its count, not a timeout).
    upstream.setHandler((exchange) => answerJson(exchange, 200, { output: 'twice' }))
    const duplicate = send(other.url, EXECUTE, { headers: keyed('k-failed-look'), json: { input: 1 } })
    // The duplicate has looked and found the first running once it has looked twice (its second look
    // comes after a wait); then its looks fail for a moment with an error reply (as a stalled or
    // refusing store's would), the connection up all along.
    const evalsha = async (field: 'calls' | 'rejected_calls'): Promise<number> =>
      Number(new RegExp(`[:,]${field}=(\\d+)`).exec(String(await redis.client().info('commandstats')).split('\n').find((line) => line.startsWith('cmdstat_evalsha')) ?? '')?.[1] ?? 0)
    const callsBefore = await evalsha('calls')
    await until(async () => (await evalsha('calls')) >= callsBefore + 2, 5_000)
    const rejectedBefore = await evalsha('rejected_calls')
    await redis.client().call('ACL', 'SETUSER', 'default', '-evalsha', '-eval')
    try {
      await until(async () => (await evalsha('rejected_calls')) > rejectedBefore, 5_000)
    } finally {
      await redis.client().call('ACL', 'SETUSER', 'default', '+@all')
    }
    answerJson(held, 200, { output: 'once' })
    expect((await first).status).toBe(200)
    const second = await duplicate
    expect(second.status).toBe(200)
    expect(second.headers['idempotent-replayed']).toBe('true')
    // SPEC 16 across replicas: one execution of one key (it ran twice: the failed look was read as the store away).
    expect(executions(upstream)).toHaveLength(1)
  }, 30_000)
})
