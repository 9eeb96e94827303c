import type { IncomingMessage, ServerResponse } from 'node:http'
import { connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { LINGER_AFTER_ANSWER_MS } from '../../src/kernel/connection-close.js'
import { stringify } from 'yaml'
import { send } from '../helpers/http.js'
import { startHttpServer } from '../helpers/http-server.js'
import { parseRawResponse, rawExchange, type RawResponse } from '../helpers/raw-http.js'
import { spawnGateway } from '../helpers/spawn-gateway.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

/**
 * Answers written before the request's body has arrived (a 413, an upstream that answered or
 * failed mid-upload) reach the client even when it sends its whole body before it reads, as
 * clients without `Expect: 100-continue` do: the gateway reads and drops the rest of the body
 * before it closes (connection-close.ts). Closing at once had the kernel answer the client's
 * next bytes with a reset, which threw the answer away: the client saw EPIPE and nothing else.
 */

const MiB = 1024 * 1024

interface UploadOutcome {
  response: RawResponse | undefined
  /** Body bytes the client got to write. */
  sent: number
  errorCode: string | undefined
  /** The client's connection, its own side still open. */
  socket: Socket
}

/**
 * A client that writes a request of `size` body bytes whole before it reads anything, or only
 * `stopAfter` of them and then keeps its side open. Resolves once the server has ended its side.
 */
function uploadThenRead(baseUrl: string, head: string, size: number, stopAfter = size): Promise<UploadOutcome> {
  const { hostname, port } = new URL(baseUrl)
  return new Promise((resolve) => {
    // allowHalfOpen: the client's side stays open after the server's FIN, as a client's that is still sending.
    const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true })
    const chunks: Buffer[] = []
    let sent = 0
    let errorCode: string | undefined
    const settle = (): void => resolve({ response: parseRawResponse(Buffer.concat(chunks), true, 'POST'), sent, errorCode, socket })
    socket.pause()
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', (error: NodeJS.ErrnoException) => (errorCode = error.code))
    socket.on('end', settle)
    socket.on('close', settle)
    socket.write(`${head}content-length: ${size}\r\n\r\n`)
    const slice = Buffer.alloc(64 * 1024, 0x20)
    const pump = (): void => {
      while (sent < stopAfter) {
        const piece = slice.subarray(0, Math.min(slice.length, stopAfter - sent))
        sent += piece.length
        if (!socket.write(piece)) {
          socket.once('drain', pump)
          return
        }
      }
      // All written (or all it will write): now it reads.
      socket.resume()
    }
    pump()
  })
}

/** Open connections on the gateway's traffic listener. */
function openConnections(gw: StartedGateway): Promise<number> {
  return new Promise((resolve, reject) => gw.gateway.trafficServer.getConnections((error, count) => (error ? reject(error) : resolve(count))))
}

const LEGACY_HEAD = 'POST /v1/headless/runs HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer t\r\ncontent-type: application/json\r\n'
const NATIVE_HEAD = 'POST /v4/execute HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer t\r\ncontent-type: application/json\r\n'

/** An upstream that answers at once, before reading the body, then reads the rest before it closes (as nginx does). */
function answerEarlyAndLinger(statusCode: number) {
  return (request: IncomingMessage, response: ServerResponse): void => {
    const socket = request.socket
    socket.destroySoon = () => {
      socket.end()
      request.resume()
      request.once('end', () => socket.destroy())
    }
    response.writeHead(statusCode, { connection: 'close', 'content-type': 'application/json', 'content-length': 22 })
    response.end('{"error":"too large!"}')
  }
}

describe('an answer written before the request body has arrived', () => {
  it('a legacy body declared over limits.bodyBytes: a client that writes 40 MiB first still reads its 413', async () => {
    const gw = await startGateway(testConfig('http://127.0.0.1:9'))
    const outcome = await uploadThenRead(gw.url, LEGACY_HEAD, 40 * MiB)
    expect(outcome.sent).toBe(40 * MiB)
    expect(outcome.errorCode).toBeUndefined()
    expect(outcome.response?.status).toBe(413)
    expect(outcome.response?.headers.connection).toBe('close')
    expect(outcome.response?.json).toMatchObject({ error: { code: 'PAYLOAD_TOO_LARGE' } })
    outcome.socket.destroy()
  })

  it('an Expect: 100-continue request refused before its 100, whose client sends the body anyway, gets its 401', async () => {
    const gw = await startGateway(testConfig('http://127.0.0.1:9'))
    // RFC 9110 10.1.1 lets a client send the body without waiting for the 100; Node's writeHead
    // closes the connection after a final answer sent before it.
    const head = 'POST /v1/headless/runs HTTP/1.1\r\nhost: gw\r\nexpect: 100-continue\r\nauthorization: Bearer key_x\r\ncontent-type: application/json\r\n'
    const outcome = await uploadThenRead(gw.url, head, 8 * MiB)
    expect(outcome.sent).toBe(8 * MiB)
    expect(outcome.errorCode).toBeUndefined()
    expect(outcome.response?.status).toBe(401)
    expect(outcome.response?.headers.connection).toBe('close')
    outcome.socket.destroy()
  })

  it('serves nothing pipelined behind an Expect: 100-continue request refused before its 100', async () => {
    let served = 0
    const upstream = await startHttpServer((_request, response) => {
      served++
      response.end('{}')
    })
    const gw = await startGateway(testConfig(upstream.url))
    const head = 'POST /v1/headless/runs HTTP/1.1\r\nhost: gw\r\nexpect: 100-continue\r\nauthorization: Bearer key_x\r\ncontent-type: application/json\r\n'
    const { hostname, port } = new URL(gw.url)
    const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true })
    const received: Buffer[] = []
    socket.on('data', (chunk: Buffer) => received.push(chunk))
    const ended = new Promise<void>((resolve) => socket.once('end', resolve))
    socket.write(`${head}content-length: 11\r\n\r\n{"input":1}DELETE /v4/things/1 HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer t\r\n\r\n`)
    await ended
    expect(parseRawResponse(Buffer.concat(received), false, 'POST')?.status).toBe(401)
    await until(async () => (await openConnections(gw)) === 0)
    expect(served).toBe(0)
    socket.destroy()
  })

  it('a native upload the upstream answered at once (its own 413, connection: close) gets that answer', async () => {
    const upstream = await startHttpServer(answerEarlyAndLinger(413))
    const gw = await startGateway(testConfig(upstream.url))
    const outcome = await uploadThenRead(gw.url, NATIVE_HEAD, 40 * MiB)
    expect(outcome.sent).toBe(40 * MiB)
    expect(outcome.errorCode).toBeUndefined()
    expect(outcome.response?.status).toBe(413)
    expect(outcome.response?.text).toBe('{"error":"too large!"}')
    outcome.socket.destroy()
  })

  it('serves nothing pipelined behind the body of a request whose answer closes the connection', async () => {
    let served = 0
    const answerEarly = answerEarlyAndLinger(413)
    const upstream = await startHttpServer((request, response) => {
      served++
      answerEarly(request, response)
    })
    const gw = await startGateway(testConfig(upstream.url))
    const { hostname, port } = new URL(gw.url)
    const socket = connect({ host: hostname, port: Number(port), allowHalfOpen: true })
    const received: Buffer[] = []
    socket.on('data', (chunk: Buffer) => received.push(chunk))
    const ended = new Promise<void>((resolve) => socket.once('end', resolve))
    // The head and a first part of a 1 MiB body; the rest and a pipelined DELETE once the answer
    // has come (before it, the body would be whole by the answer, which then keeps the connection).
    socket.write(`${NATIVE_HEAD}content-length: ${MiB}\r\n\r\n`)
    socket.write(Buffer.alloc(64 * 1024, 0x20))
    await until(() => Buffer.concat(received).includes('\r\n\r\n'))
    expect(parseRawResponse(Buffer.concat(received), false, 'POST')?.status).toBe(413)
    socket.write(Buffer.alloc(MiB - 64 * 1024, 0x20))
    socket.write('DELETE /v4/things/1 HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer t\r\n\r\n')
    await ended
    // Read to its end and past: the DELETE was read off the connection, and never served, nor
    // begun (a request the kernel takes has a line, 499 when its connection goes first).
    await until(async () => (await openConnections(gw)) === 0)
    await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.path === '/v4/execute'))
    expect(served).toBe(1)
    expect(gw.logs.lines().filter((line) => line.msg === 'request').map((line) => line.path)).toEqual(['/v4/execute'])
    socket.destroy()
  })

  it('a client that asked to close (Connection: close) and is refused before its body gets its 401 too', async () => {
    const gw = await startGateway(testConfig('http://127.0.0.1:9'))
    const head = 'POST /v1/headless/runs HTTP/1.1\r\nhost: gw\r\nconnection: close\r\ncontent-type: application/json\r\n'
    const outcome = await uploadThenRead(gw.url, head, 8 * MiB)
    expect(outcome.sent).toBe(8 * MiB)
    expect(outcome.errorCode).toBeUndefined()
    expect(outcome.response?.status).toBe(401)
    outcome.socket.destroy()
  })

  it('a native upload the upstream cut midway gets the 502 envelope', async () => {
    const upstream = await startHttpServer((request) => {
      let read = 0
      request.on('data', (chunk: Buffer) => {
        read += chunk.length
        if (read > MiB) request.socket.destroy()
      })
    })
    const gw = await startGateway(testConfig(upstream.url))
    const outcome = await uploadThenRead(gw.url, NATIVE_HEAD, 40 * MiB)
    expect(outcome.errorCode).toBeUndefined()
    expect(outcome.response?.status).toBe(502)
    expect(outcome.response?.json).toMatchObject({ error: { code: 'UPSTREAM_UNAVAILABLE' } })
    outcome.socket.destroy()
  })

  it('a small native upload the upstream cut before its end: the 502 is the upstream failure it is on the access line, not a client that left', async () => {
    // 64 KiB or less goes to undici as the request itself, which undici destroys when its call fails.
    const upstream = await startHttpServer((request) => {
      let read = 0
      request.on('data', (chunk: Buffer) => {
        read += chunk.length
        if (read >= 4_096) request.socket.resetAndDestroy()
      })
    })
    const gw = await startGateway(testConfig(upstream.url))
    const outcome = await uploadThenRead(gw.url, `${NATIVE_HEAD}x-request-id: small-cut-1\r\n`, 10_000, 4_096)
    expect(outcome.response?.status).toBe(502)
    expect(outcome.response?.json).toMatchObject({ error: { code: 'UPSTREAM_UNAVAILABLE' } })
    await until(async () => gw.logs.lines().some((line) => line.msg === 'request' && line.requestId === 'small-cut-1'))
    const line = gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'small-cut-1')
    expect(line).toMatchObject({ status: 502, error: 'UPSTREAM_UNAVAILABLE' })
    expect(gw.logs.lines().some((entry) => entry.requestId === 'small-cut-1' && /went away/.test(String(entry.msg)))).toBe(false)
    outcome.socket.destroy()
  })

  it('a client that stops sending the rest has its 413, and the connection is closed after the linger', async () => {
    const gw = await startGateway(testConfig('http://127.0.0.1:9'))
    // 2 MiB of a declared 40: the connection waits for the rest no longer than LINGER_AFTER_ANSWER_MS.
    const outcome = await uploadThenRead(gw.url, LEGACY_HEAD, 40 * MiB, 2 * MiB)
    const answeredAt = performance.now()
    expect(outcome.response?.status).toBe(413)
    expect(await openConnections(gw)).toBe(1)
    await until(async () => (await openConnections(gw)) === 0, LINGER_AFTER_ANSWER_MS + 5_000)
    expect(performance.now() - answeredAt).toBeGreaterThan(LINGER_AFTER_ANSWER_MS - 1_000)
    outcome.socket.destroy()
  }, 20_000)
})

describe('an answer that closes the connection after a body that came whole meanwhile (a process of its own)', () => {
  const dir = useTempDir('v4gw-linger-')

  it('closes as Node does, and the gateway goes on serving (a refused head, Connection: close, HTTP/1.0)', async () => {
    const config = { listen: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 }, tenancy: { default: 'acme' }, tenants: { acme: { upstream: { staging: 'http://127.0.0.1:9' } } } }
    const gateway = await spawnGateway(await dir.write('gateway.yaml', stringify(config)))
    // Each answered as its request is being read: the body is whole only once the answer has gone.
    const requests = [
      'GET / HTTP/1.1\r\n\r\n',
      'POST /v1/headless/runs HTTP/1.1\r\nhost: gw\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"input":1}',
      'POST /v1/headless/runs HTTP/1.0\r\nhost: gw\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"input":1}'
    ]
    const statuses = []
    for (const request of requests) {
      const result = await rawExchange(gateway.url, request, { timeoutMs: 3_000 })
      expect(result.closedByServer).toBe(true)
      statuses.push(result.response?.status)
    }
    expect(statuses).toEqual([400, 401, 401])
    expect((await send(gateway.adminUrl, '/healthz')).status).toBe(200)
    expect(gateway.child.exitCode).toBeNull()
    expect(gateway.output()).not.toMatch(/ReferenceError|uncaught/i)
  }, 30_000)
})
