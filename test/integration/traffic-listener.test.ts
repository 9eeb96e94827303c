import { connect } from 'node:net'
import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { writeGatewayError } from '../../src/kernel/write-error.js'
import { expectGatewayError } from '../helpers/gateway-error.js'
import { GatewayError } from '../../src/errors/registry.js'
import { Exchange } from '../../src/kernel/exchange.js'
import { send } from '../helpers/http.js'
import { startHttpServer } from '../helpers/http-server.js'
import { rawExchange } from '../helpers/raw-http.js'
import { until } from '../helpers/until.js'
import { startRecordingUpstream, useRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js'
import { startGateway, testConfig, useGateway } from '../helpers/start-gateway.js'

/**
 * What the traffic listener keeps by hand now that it is node:http rather than a fastify route
 * (docs/decisions.md): its server settings, and which requests carry a body upstream.
 */
const upstream = useRecordingUpstream()
const gw = useGateway(() => testConfig(upstream.url))

/** An upstream that holds every answer until `release()`: requests stay in flight meanwhile; closed when the test finishes. */
async function startHeldUpstream(): Promise<{ upstream: RecordingUpstream; release: () => void }> {
  let release: () => void = () => undefined
  const held = new Promise<void>((resolve) => (release = resolve))
  const slow = await startRecordingUpstream(async (_request, response) => {
    await held
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end('{"output":1}')
  })
  return { upstream: slow, release }
}

function upstreamRequestCount(): number {
  return upstream.requests.length
}

function lastRequest() {
  const recorded = upstream.requests.at(-1)
  if (recorded === undefined) throw new Error('nothing reached the upstream')
  return recorded
}

async function exchange(head: string, body = '') {
  const result = await rawExchange(gw.url, head + body, { timeoutMs: 3_000 })
  if (result.response === undefined) throw new Error(`no answer: ${result.bytes.toString('latin1')}`)
  return result.response
}

describe('the traffic server', () => {
  it('keeps Node’s 5-minute request timeout, outlives a 60 s load-balancer idle timeout, and reads every header', () => {
    const server = gw.gateway.trafficServer
    expect(server.requestTimeout).toBe(300_000)
    expect(server.keepAliveTimeout).toBe(72_000)
    expect(server.maxHeadersCount).toBe(0)
  })

  it('lets go of a refused CONNECT connection whose client keeps its side open, so a drain can end', async () => {
    const own = await startGateway(testConfig(upstream.url))
    const { port } = new URL(own.url)
    // allowHalfOpen: the client never answers the gateway's FIN with its own.
    const socket = connect({ host: '127.0.0.1', port: Number(port), allowHalfOpen: true })
    let received = ''
    socket.setEncoding('latin1')
    socket.on('data', (text: string) => (received += text))
    socket.on('error', () => undefined)
    socket.write('CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n')
    await until(() => received.includes('"INVALID_REQUEST"'))
    expect(received).toMatch(/^HTTP\/1\.1 400 /)
    // close() resolves once every connection has ended: the gateway must end this one itself.
    const ended = await Promise.race([own.gateway.close().then(() => true), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 4_000))])
    socket.destroy()
    expect(ended).toBe(true)
  })

  it('counts what Node refuses before the handler (malformed HTTP, CONNECT) in v4gw_requests_total, and not on the admin listener', async () => {
    const own = await startGateway(testConfig(upstream.url))
    const refusedUnread = async (): Promise<number> => {
      const text = (await send(own.adminUrl, '/metrics')).text
      const line = /^v4gw_requests_total\{tenant="",class="unknown",route="",status_class="4xx",code="400"\} (\d+)$/m.exec(text)
      return line === null ? 0 : Number(line[1])
    }
    expect(await refusedUnread()).toBe(0)
    for (const bytes of ['GET / HTTP/1.1\r\nBad Header\r\n\r\n', 'CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n']) {
      expect((await rawExchange(own.url, bytes, { timeoutMs: 3_000 })).response?.status).toBe(400)
    }
    expect((await rawExchange(own.adminUrl, 'GET / HTTP/1.1\r\nBad Header\r\n\r\n', { timeoutMs: 3_000 })).response?.status).toBe(400)
    expect(await refusedUnread()).toBe(2)
  })

  it('serves a request whose Expect is not 100-continue, ignoring the expectation (RFC 9110 10.1.1)', async () => {
    upstream.requests.length = 0
    const answer = await rawExchange(gw.url, 'GET /v4/expect-probe HTTP/1.1\r\nHost: a\r\nExpect: bogus\r\nConnection: close\r\n\r\n', { timeoutMs: 3_000 })
    expect(answer.response?.status).toBe(200)
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v4/expect-probe'])
    expect(upstream.requests[0]?.headers.expect).toBeUndefined()
  })

  it('stops listening on close and then refuses new connections', async () => {
    const upstreamForClose = await startRecordingUpstream()
    const own = await startGateway(testConfig(upstreamForClose.url))
    await own.close()
    expect(own.gateway.trafficServer.listening).toBe(false)
    const refused = await rawExchange(own.url, 'GET /v4/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n', { timeoutMs: 1_000 })
    expect(refused.errorCode).toBe('ECONNREFUSED')
  })
})

describe('request bodies on native passthrough (RFC 9112 6.3)', () => {
  it('sends no body and no chunked framing for a POST without Content-Length or Transfer-Encoding', async () => {
    const answer = await exchange('POST /v4/execute HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer tok_a\r\nConnection: close\r\n\r\n')
    expect(answer.status).toBe(200)
    const recorded = lastRequest()
    expect(recorded.headers['transfer-encoding']).toBeUndefined()
    expect(recorded.body.length).toBe(0)
  })

  it('passes a Content-Length: 0 POST on with an empty body', async () => {
    const answer = await exchange('POST /v4/execute HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
    expect(answer.status).toBe(200)
    const recorded = lastRequest()
    expect(recorded.headers['transfer-encoding']).toBeUndefined()
    expect(recorded.headers['content-length']).toBe('0')
    expect(recorded.body.length).toBe(0)
  })

  it('streams the body of a DELETE that has one, and a chunked body as it came', async () => {
    await exchange('DELETE /v4/things/1 HTTP/1.1\r\nHost: gw.test\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n', '{"why":"x"}')
    expect(lastRequest().method).toBe('DELETE')
    expect(lastRequest().body.toString()).toBe('{"why":"x"}')
    await exchange('POST /v4/execute HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n', '5\r\nhello\r\n0\r\n\r\n')
    expect(lastRequest().body.toString()).toBe('hello')
  })

  it.each(['gzip, chunked', 'deflate,Chunked'])('refuses a body with a transfer coding besides chunked (%s) with 400 and connection: close, sending nothing on', async (codings) => {
    const before = upstreamRequestCount()
    const answer = await exchange(`POST /v4/execute HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: ${codings}\r\n\r\n`, '5\r\nhello\r\n0\r\n\r\n')
    // Node frames these (chunked last) and hands them to the gateway, which cannot pass them on as they are.
    expect(answer.status).toBe(400)
    expect(answer.json.error.details).toEqual([expect.objectContaining({ pointer: 'header:transfer-encoding' })])
    expect(answer.headers.connection).toBe('close')
    expect(upstreamRequestCount()).toBe(before)
  })

  it('takes "chunked" in any case', async () => {
    await exchange('POST /v4/execute HTTP/1.1\r\nHost: gw.test\r\nTransfer-Encoding: CHUNKED\r\nConnection: close\r\n\r\n', '5\r\nhello\r\n0\r\n\r\n')
    expect(lastRequest().body.toString()).toBe('hello')
  })

  it('never reads a GET body: the upstream gets none', async () => {
    const answer = await exchange('GET /v4/things HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 4\r\nConnection: close\r\n\r\n', 'abcd')
    expect(answer.status).toBe(200)
    expect(lastRequest().method).toBe('GET')
    expect(lastRequest().body.length).toBe(0)
  })
})

describe('edge answers of the traffic listener', () => {
  const TOKEN = { authorization: 'Bearer tok_review' }

  it('a legacy 204 keeps its framing: no Content-Length and no body (RFC 9110 8.6)', async () => {
    const noContent = await startRecordingUpstream((_request, response) => {
      response.writeHead(204, { 'x-upstream': 'yes' })
      response.end()
    })
    const own = await startGateway(testConfig(noContent.url))
    const answer = await rawExchange(own.url, 'POST /v1/headless/runs HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer tok_a\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{"input":1}', { timeoutMs: 3_000 })
    expect(answer.response?.status).toBe(204)
    expect(answer.response?.headers['content-length']).toBeUndefined()
    expect(answer.response?.headers['x-upstream']).toBe('yes')
    expect(answer.response?.body.length).toBe(0)
  })

  it('a deprecation link with a non-ASCII path is sent percent-encoded, and legacy calls are answered', async () => {
    const own = await startGateway(testConfig(upstream.url, { tenants: { acme: { upstream: { staging: upstream.url }, legacy: { deprecation: { date: '2026-01-01T00:00:00Z', link: 'https://docs.example/migrate/d€' } } } } }))
    const answer = await send(own.url, '/v1/headless/runs', { headers: TOKEN, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(answer.headers.link).toBe('<https://docs.example/migrate/d%E2%82%AC>; rel="deprecation", </v4/execute>; rel="successor-version"')
  })

  it('an error whose own headers cannot be written is still answered in the envelope', async () => {
    const server = await startHttpServer((request, response) => {
      const exchange = new Exchange(request, response)
      exchange.answerHeaders.link = 'not\u0000writable'
      writeGatewayError(exchange, new GatewayError('ROUTE_NOT_FOUND', 'nothing here'), pino({ level: 'silent' }))
    })
    const answer = await send(server.url, '/anything')
    expect(answer.status).toBe(404)
    expect(answer.json.error.code).toBe('ROUTE_NOT_FOUND')
    expect(answer.headers.link).toBeUndefined()
  })

  it('a fault that is no GatewayError is answered 500 INTERNAL_ERROR in the envelope, and logged as the gateway\'s error', async () => {
    const lines: Array<Record<string, unknown>> = []
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) })
    const server = await startHttpServer((request, response) => {
      writeGatewayError(new Exchange(request, response), new Error('boom: a bug'), log)
    })
    const answer = await send(server.url, '/anything')
    expectGatewayError(answer, 500, 'INTERNAL_ERROR')
    // The envelope says nothing of the bug; the log line has it.
    expect(answer.text).not.toContain('boom')
    expect(lines.find((line) => line.msg === 'gateway error')).toMatchObject({ level: 50 })
  })

  it('a request in flight when draining starts is answered with connection: close, legacy and native', async () => {
    const { upstream: slow, release } = await startHeldUpstream()
    const own = await startGateway(testConfig(slow.url))
    try {
      const legacy = send(own.url, '/v1/headless/runs', { headers: TOKEN, json: { input: 1 } })
      const native = send(own.url, '/v4/execute', { headers: TOKEN, json: { input: 1 } })
      await until(() => slow.requests.length === 2)
      own.gateway.startDraining()
      release()
      const answers = await Promise.all([legacy, native])
      expect(answers.map((answer) => answer.status)).toEqual([200, 200])
      expect(answers.map((answer) => answer.headers.connection)).toEqual(['close', 'close'])
    } finally {
      // A held answer would keep the gateway's close waiting.
      release()
    }
  })

  it('a legacy body that runs over limits.bodyBytes part-way is answered 413 with connection: close', async () => {
    const own = await startGateway(testConfig(upstream.url, { limits: { bodyBytes: 1024 } }))
    const chunk = 'x'.repeat(2048)
    const answer = await rawExchange(
      own.url,
      `POST /v1/headless/runs HTTP/1.1\r\nHost: gw.test\r\nAuthorization: Bearer tok_a\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n`,
      { timeoutMs: 3_000 }
    )
    expect(answer.response?.status).toBe(413)
    expect(answer.response?.headers.connection).toBe('close')
    expect(answer.closedByServer).toBe(true)
  })

  it('sheds with 503 OVERLOADED without an error-level log line per shed request', async () => {
    const { upstream: slow, release } = await startHeldUpstream()
    const own = await startGateway(testConfig(slow.url, { limits: { maxInFlight: 1 } }))
    try {
      const first = send(own.url, '/v4/execute', { headers: TOKEN, json: { input: 1 } })
      await until(() => slow.requests.length === 1)
      const shed = await send(own.url, '/v4/execute', { headers: TOKEN, json: { input: 1 } })
      expect(shed.status).toBe(503)
      expect(shed.json.error.code).toBe('OVERLOADED')
      release()
      expect((await first).status).toBe(200)
      await until(() => own.logs.lines().filter((line) => line.msg === 'request').length === 2)
      expect(own.logs.lines().filter((line) => (line.level as number) >= 50)).toEqual([])
    } finally {
      release()
    }
  })
})
