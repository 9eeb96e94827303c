import { request as httpRequest } from 'node:http'
import { connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { buildRawRequest, rawExchange } from '../helpers/raw-http.js'
import { send } from '../helpers/http.js'
import { refusingOrigin } from '../helpers/fault-upstream.js'
import { startHttpServer } from '../helpers/http-server.js'
import { startGateway, testConfig } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { until, within } from '../helpers/until.js'

const ALICE = 'Bearer demo-token-alice'
// The body limit is upstreamTimeoutMs: short here, so that a stall is seen within the test's time.
const LIMITS = { upstreamTimeoutMs: 1_000, maxInFlight: 2 }

/** A request whose headers promise 1,000 bytes of body, of which only `sent` come. */
function stalledRequest(path: string, sent: string): Buffer {
  return buildRawRequest(`POST ${path} HTTP/1.1`, [['host', 'gw.test'], ['authorization', ALICE], ['content-type', 'application/json'], ['content-length', '1000']], sent)
}

describe('a request body that stops arriving (SPEC 10)', () => {
  const sim = useSimulator()

  it.each([
    ['native', '/v4/execute'],
    ['legacy', '/v1/headless/runs']
  ])('is answered 408 REQUEST_TIMEOUT and its connection closed, freeing its in-flight slot: %s', async (_class, path) => {
    const gw = await startGateway(testConfig(sim.url, { limits: LIMITS }))
    const stalled = [rawExchange(gw.url, stalledRequest(path, '{"input":'), { timeoutMs: 6_000 }), rawExchange(gw.url, stalledRequest(path, '{"in'), { timeoutMs: 6_000 })]
    // Both slots are held: a third request is shed.
    await until(async () => /^v4gw_requests_in_flight 2$/m.test((await send(gw.adminUrl, '/metrics')).text))
    expect((await send(gw.url, '/v4/execute', { headers: { authorization: ALICE }, json: { input: 1 } })).status).toBe(503)

    for (const result of await Promise.all(stalled)) {
      expect(result.timedOut).toBe(false)
      expect(result.closedByServer).toBe(true)
      expect(result.response?.status).toBe(408)
      expect(result.response?.json.error.code).toBe('REQUEST_TIMEOUT')
      expect(result.response?.headers.connection).toBe('close')
    }
    expect((await send(gw.url, '/v4/execute', { headers: { authorization: ALICE }, json: { input: 1 } })).status).toBe(200)
    const lines = gw.logs.lines().filter((line) => line.msg === 'request' && line.status === 408)
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatchObject({ error: 'REQUEST_TIMEOUT' })
  })

  // RFC 9112 6.3: the answer streams to an HTTP/1.0 client without a length (delimited by the
  // close); the upload under it stalls, so the answer is cut: by a reset, not a FIN that would end
  // it as if whole.
  it('resets an HTTP/1.0 client’s connection whose close-delimited answer its stalled upload cut', async () => {
    // The answer keeps coming (a byte every 450 ms, inside the upstream limit): only the upload stalls.
    const upstream = await startHttpServer((request, response) => {
      request.resume()
      response.writeHead(200, { 'content-type': 'text/plain' })
      response.write('part of the answer')
      const trickle = setInterval(() => response.write('.'), 450)
      response.on('close', () => clearInterval(trickle))
    })
    const gw = await startGateway(testConfig(upstream.url, { limits: LIMITS, log: { level: 'info' } }))
    const { hostname, port } = new URL(gw.url)
    const socket: Socket = connect({ host: hostname, port: Number(port) })
    const received: Buffer[] = []
    let ended: string | undefined
    socket.on('data', (chunk: Buffer) => received.push(chunk))
    socket.on('end', () => (ended ??= 'end'))
    socket.on('error', (error: NodeJS.ErrnoException) => (ended ??= error.code))
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write(buildRawRequest('POST /v4/upload HTTP/1.0', [['host', 'gw.test'], ['authorization', ALICE], ['content-type', 'text/plain'], ['content-length', '100000'], ['x-request-id', 'upload-stalled-http10']]))
    socket.write('x'.repeat(1_000))
    // The answer's head and first bytes arrive (read at once), then the upload stops for good.
    await until(() => Buffer.concat(received).toString('latin1').includes('part of the answer'))
    await until(() => ended !== undefined, 5_000)
    expect(Buffer.concat(received).toString('latin1')).toMatch(/^HTTP\/1\.1 200 /)
    expect(ended).toBe('ECONNRESET')
    socket.destroy()
    await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.requestId === 'upload-stalled-http10'))
    expect(gw.logs.lines().find((line) => line.msg === 'request' && line.requestId === 'upload-stalled-http10')).toMatchObject({ status: 408, error: 'REQUEST_TIMEOUT' })
  })

  it('lets a slow body that keeps arriving finish, however long it takes in all', async () => {
    const gw = await startGateway(testConfig(sim.url, { limits: LIMITS }))
    const body = JSON.stringify({ input: 'x'.repeat(40) })
    const { hostname, port } = new URL(gw.url)
    const socket: Socket = connect({ host: hostname, port: Number(port) })
    const received: Buffer[] = []
    socket.on('data', (chunk: Buffer) => received.push(chunk))
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write(buildRawRequest('POST /v1/headless/runs HTTP/1.1', [['host', 'gw.test'], ['authorization', ALICE], ['content-type', 'application/json'], ['content-length', String(body.length)]]))
    // A few bytes every 400 ms: 2.4 s in all, over twice the limit, never 1 s without progress.
    for (let offset = 0; offset < body.length; offset += 8) {
      socket.write(body.slice(offset, offset + 8))
      await new Promise((resolve) => setTimeout(resolve, 400))
    }
    await until(() => Buffer.concat(received).toString('latin1').includes('\r\n\r\n'))
    socket.destroy()
    expect(Buffer.concat(received).toString('latin1')).toMatch(/^HTTP\/1\.1 200 /)
  })

  it('does not cut a native stream whose upstream stopped taking the body: that wait is the gateway’s, not the client’s', async () => {
    // Answers at once and streams for 3 s (three times the limit), never reading the upload.
    const upstream = await startHttpServer((request, response) => {
      request.pause()
      response.writeHead(200, { 'content-type': 'text/plain' })
      let sent = 0
      const timer = setInterval(() => {
        response.write(`chunk ${++sent}\n`)
        if (sent === 10) {
          clearInterval(timer)
          response.end()
        }
      }, 300)
    })
    const gw = await startGateway(testConfig(upstream.url, { limits: LIMITS }))
    const { hostname, port } = new URL(gw.url)
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const call = httpRequest({ host: hostname, port: Number(port), method: 'POST', path: '/v4/upload', headers: { authorization: ALICE, 'content-type': 'application/octet-stream', 'content-length': String(64 * 1024 * 1024) } })
      call.on('response', (response) => {
        let text = ''
        response.setEncoding('utf8')
        response.on('data', (chunk: string) => (text += chunk))
        response.on('end', () => {
          resolve({ status: response.statusCode ?? 0, text })
          call.destroy()
        })
        response.on('error', reject)
      })
      call.on('error', () => undefined)
      // The client sends as fast as it is let: its writes wait only on back-pressure.
      const chunk = Buffer.alloc(64 * 1024)
      const pump = (): void => {
        while (!call.destroyed && call.write(chunk));
        if (!call.destroyed) call.once('drain', pump)
      }
      pump()
    })
    expect(answer.status).toBe(200)
    expect(answer.text.trim().split('\n')).toHaveLength(10)
  })
})

describe('an answer its client stops reading (SPEC 10)', () => {
  it('is cut once the client has taken none of it for upstreamTimeoutMs: its upstream call cancelled, its slot freed, its line 408', async () => {
    let upstreamCut = false
    // An answer far larger than the socket buffers, written as fast as it is taken.
    const upstream = await startHttpServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream' })
      response.on('close', () => (upstreamCut = !response.writableFinished))
      const chunk = Buffer.alloc(256 * 1024)
      let left = 1_024
      const pump = (): void => {
        while (left > 0 && !response.destroyed) {
          left--
          if (!response.write(chunk)) return void response.once('drain', pump)
        }
        if (left === 0) response.end()
      }
      pump()
    })
    const gw = await startGateway(testConfig(upstream.url, { limits: { upstreamTimeoutMs: 1_000, maxInFlight: 1 }, log: { level: 'info' } }))
    const { hostname, port } = new URL(gw.url)
    const socket: Socket = connect({ host: hostname, port: Number(port) })
    socket.on('error', () => undefined)
    await new Promise((resolve) => socket.once('connect', resolve))
    // The client asks and never reads a byte of the answer.
    socket.pause()
    socket.write(buildRawRequest('GET /v4/export HTTP/1.1', [['host', 'gw.test'], ['authorization', ALICE], ['x-request-id', 'stalled-reader-1']]))
    const line = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'stalled-reader-1')
    await until(() => line() !== undefined, 10_000)
    expect(line()).toMatchObject({ status: 408, error: 'REQUEST_TIMEOUT' })
    await until(() => upstreamCut, 5_000)
    // The one in-flight slot is free again.
    expect((await send(gw.url, '/v4/small', { headers: { authorization: ALICE } })).status).not.toBe(503)
    socket.destroy()
  })


  // RFC 9112 6.3: Node writes an answer of unknown length to an HTTP/1.0 client delimited by the
  // close, so a FIN would end it as if whole: the cut resets the connection. A paused Node socket
  // reads nothing (libuv would take a reset behind unread data for an EOF), so the client probes
  // with a write: after a reset it fails, after a FIN it is taken.
  it('resets an HTTP/1.0 client’s connection whose close-delimited answer it stopped reading', async () => {
    const upstream = await startHttpServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream' })
      const chunk = Buffer.alloc(256 * 1024)
      const pump = (): void => {
        while (!response.destroyed) if (!response.write(chunk)) return void response.once('drain', pump)
      }
      pump()
    })
    const gw = await startGateway(testConfig(upstream.url, { limits: { upstreamTimeoutMs: 500 }, log: { level: 'info' } }))
    const { hostname, port } = new URL(gw.url)
    const socket: Socket = connect({ host: hostname, port: Number(port) })
    socket.on('error', () => undefined)
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.pause()
    socket.write(buildRawRequest('GET /v4/export HTTP/1.0', [['host', 'gw.test'], ['authorization', ALICE], ['x-request-id', 'stalled-reader-http10']]))
    const line = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'stalled-reader-http10')
    await until(() => line() !== undefined, 10_000)
    expect(line()).toMatchObject({ status: 408, error: 'REQUEST_TIMEOUT' })
    await new Promise((resolve) => setTimeout(resolve, 100))
    const probe = await new Promise<string>((resolve) => socket.write('x', (error) => resolve((error as NodeJS.ErrnoException | null | undefined)?.code ?? 'taken')))
    expect(['EPIPE', 'ECONNRESET']).toContain(probe)
    socket.destroy()
  })

  it('cuts a client that takes none of a whole legacy answer written to it, and waits for one that reads it slowly (SPEC 10)', async () => {
    // A legacy answer of 15 MiB (under the 16 MiB an answer is read up to): far more than the socket buffers.
    const big = JSON.stringify({ output: 'x'.repeat(15 * 1024 * 1024), effective: { policy: 'p', route: 'r', risk: 'low' }, meta: { requestId: 'r' } })
    const upstream = await startHttpServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(big) })
      response.end(big)
    })
    const gw = await startGateway(testConfig(upstream.url, { limits: { upstreamTimeoutMs: 1_000, maxInFlight: 1 }, log: { level: 'info' } }))
    const { hostname, port } = new URL(gw.url)
    const body = '{"input":1}'
    const ask = (requestId: string): Socket => {
      const socket: Socket = connect({ host: hostname, port: Number(port) })
      socket.on('error', () => undefined)
      socket.write(buildRawRequest('POST /v1/headless/runs HTTP/1.1', [['host', 'gw.test'], ['authorization', ALICE], ['content-type', 'application/json'], ['content-length', String(body.length)], ['x-request-id', requestId]], body))
      return socket
    }
    const line = (requestId: string) => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === requestId)

    // Never reads a byte: cut, its line 408, its one slot free again.
    const stalled = ask('whole-answer-stalled')
    stalled.pause()
    await until(() => line('whole-answer-stalled') !== undefined, 10_000)
    expect(line('whole-answer-stalled')).toMatchObject({ status: 408, error: 'REQUEST_TIMEOUT' })
    // Its line counts what was written before the cut, not the whole answer.
    expect(line('whole-answer-stalled')?.bytesOut).toBeLessThan(Buffer.byteLength(big) / 2)
    stalled.destroy()

    // Reads all of it in small bites, taking longer than upstreamTimeoutMs in all: served whole.
    const slow = ask('whole-answer-slow')
    let received = 0
    slow.on('data', (chunk: Buffer) => {
      received += chunk.length
      slow.pause()
      setTimeout(() => slow.resume(), 20)
    })
    await until(() => received > Buffer.byteLength(big), 60_000)
    await until(() => line('whole-answer-slow') !== undefined, 5_000)
    expect(line('whole-answer-slow')).toMatchObject({ status: 200 })
    slow.destroy()
  }, 90_000)

  it('waits for answers queued behind a pipelined one that flows slowly for longer than upstreamTimeoutMs: their wait is for their turn, not for the reader', async () => {
    const big = JSON.stringify({ output: 'y'.repeat(256 * 1024), effective: { policy: 'p', route: 'r', risk: 'low' }, meta: { requestId: 'r' } })
    const upstream = await startHttpServer((request, response) => {
      if (request.url === '/v4/slow') {
        // 10 KiB over 2.5 s, steadily: the reader takes each piece as it comes.
        response.writeHead(200, { 'content-type': 'application/octet-stream' })
        let sent = 0
        const timer = setInterval(() => {
          response.write(Buffer.alloc(1024))
          if (++sent === 10) {
            clearInterval(timer)
            response.end()
          }
        }, 250)
        return
      }
      // A native answer and a legacy one (the V4 answer of /v1/headless/runs), each far over Node's write buffer.
      const body = request.url === '/v4/execute' ? big : Buffer.alloc(256 * 1024)
      response.writeHead(200, { 'content-type': request.url === '/v4/execute' ? 'application/json' : 'application/octet-stream', 'content-length': Buffer.byteLength(body) })
      response.end(body)
    })
    const gw = await startGateway(testConfig(upstream.url, { limits: { upstreamTimeoutMs: 1_000 }, log: { level: 'info' } }))
    const legacyBody = '{"input":1}'
    const pipelined = Buffer.concat([
      buildRawRequest('GET /v4/slow HTTP/1.1', [['host', 'gw.test'], ['authorization', ALICE], ['x-request-id', 'queued-first']]),
      buildRawRequest('GET /v4/large HTTP/1.1', [['host', 'gw.test'], ['authorization', ALICE], ['x-request-id', 'queued-native']]),
      buildRawRequest('POST /v1/headless/runs HTTP/1.1', [['host', 'gw.test'], ['authorization', ALICE], ['content-type', 'application/json'], ['content-length', String(legacyBody.length)], ['x-request-id', 'queued-legacy'], ['connection', 'close']], legacyBody)
    ])
    const answer = await rawExchange(gw.url, pipelined, { timeoutMs: 15_000 })
    expect(answer.closedByServer).toBe(true)
    const statuses = answer.bytes.toString('latin1').match(/HTTP\/1\.1 \d{3}/g)
    expect(statuses).toEqual(['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 200'])
    const line = (requestId: string) => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === requestId)
    await until(() => line('queued-legacy') !== undefined, 5_000)
    for (const requestId of ['queued-first', 'queued-native', 'queued-legacy']) expect(line(requestId)).toMatchObject({ status: 200 })
  }, 30_000)
})

describe('an upload its upstream fails midway (SPEC 6, 7)', () => {
  it('answers 502 and closes the connection, the failure the upstream\'s, not a client gone: the rest of the body is read by no one', async () => {
    // The upstream takes part of the upload, then resets the connection.
    const upstream = await startHttpServer((request) => {
      setTimeout(() => request.socket.destroy(), 100)
    })
    const gw = await startGateway(testConfig(upstream.url, { log: { level: 'info' } }))
    const { hostname, port } = new URL(gw.url)
    const socket: Socket = connect({ host: hostname, port: Number(port) })
    socket.on('error', () => undefined)
    let received = ''
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    const closed = new Promise((resolve) => socket.once('close', resolve))
    const size = 64 * 1024 * 1024
    socket.write(buildRawRequest('POST /v4/upload HTTP/1.1', [['host', 'gw.test'], ['authorization', ALICE], ['content-length', String(size)], ['x-request-id', 'upload-cut-by-upstream']]))
    const chunk = Buffer.alloc(64 * 1024)
    let sent = 0
    const pump = (): void => {
      while (sent < size && !socket.destroyed) {
        sent += chunk.length
        if (!socket.write(chunk)) return void socket.once('drain', pump)
      }
    }
    pump()
    // Before, the connection stayed open (the client's upload blocked) until the keep-alive timeout.
    await within(closed, 10_000, 'the connection stayed open after the 502')
    expect(received).toMatch(/^HTTP\/1\.1 502 /)
    expect(received).toMatch(/\r\nconnection: close\r\n/i)
    const line = () => gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'upload-cut-by-upstream')
    await until(() => line() !== undefined, 5_000)
    expect(line()).toMatchObject({ status: 502, error: 'UPSTREAM_UNAVAILABLE' })
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/v4gw_upstream_failures_total\{tenant="acme",upstream="v4",cause="reset"\} 1/)
  })

  it('keeps the connection when the upstream refused it before any of the body went: Node reads and drops the rest, and serves the next request', async () => {
    const gw = await startGateway(testConfig(await refusingOrigin(), { log: { level: 'silent' } }))
    const body = 'x'.repeat(256 * 1024)
    const upload = buildRawRequest('POST /v4/upload HTTP/1.1', [['host', 'gw.test'], ['authorization', ALICE], ['content-length', String(body.length)]], body)
    const next = buildRawRequest('GET /v4/after HTTP/1.1', [['host', 'gw.test'], ['authorization', ALICE], ['connection', 'close']])
    const answer = await rawExchange(gw.url, Buffer.concat([upload, next]), { timeoutMs: 10_000 })
    const text = answer.bytes.toString('latin1')
    expect(text.match(/HTTP\/1\.1 \d{3}/g)).toEqual(['HTTP/1.1 502', 'HTTP/1.1 502'])
    expect(text.split('HTTP/1.1 502')[1]).not.toMatch(/connection: close/i)
  })
})
