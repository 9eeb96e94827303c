import { createHash, randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { Readable } from 'node:stream'
import { Agent, request as undiciRequest } from 'undici'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { refusingOrigin, useFaultUpstream } from '../helpers/fault-upstream.js'
import { send } from '../helpers/http.js'
import { useHttpServer } from '../helpers/http-server.js'
import { parseRawResponse, rawExchange as exchangeRaw } from '../helpers/raw-http.js'
import { useRecordingUpstream, type RecordedRequest } from '../helpers/recording-upstream.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'
import { within } from '../helpers/until.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

// For the streaming tests, which hold a response open while the test acts.
const streamingAgent = new Agent({ keepAliveTimeout: 10, keepAliveMaxTimeout: 10 })

/**
 * Writes `head` as-is on a fresh socket and returns everything the server wrote until it closed
 * (the request says `Connection: close`). The socket is not half-closed: Node aborts a request
 * whose client ended its side.
 */
async function rawExchange(baseUrl: string, head: string): Promise<string> {
  return (await exchangeRaw(baseUrl, head, { timeoutMs: 5_000 })).bytes.toString('latin1')
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void
  const promise = new Promise<void>((done) => {
    resolve = done
  })
  return { promise, resolve }
}

afterAll(async () => {
  await streamingAgent.close()
})

/** A V4 error as a backend may write it: spacing and member order JSON.stringify would not keep. */
const V4_ERROR_BYTES = '{ "error" : { "message":"backend busy", "code":"UNAVAILABLE" } }\n'

describe('native /v4/* passthrough', () => {
  let releaseStream = deferred()

  function handler(request: RecordedRequest, response: ServerResponse): void {
    const path = request.url.split('?')[0]
    if (path === '/v4/teapot') {
      response.writeHead(418, { 'content-type': 'text/plain', 'x-teapot': 'short and stout', 'cache-control': 'no-store' })
      response.end('I am a teapot')
      return
    }
    if (path === '/v4/unavailable') {
      response.writeHead(503, { 'content-type': 'application/json' })
      response.end(V4_ERROR_BYTES)
      return
    }
    if (path === '/v4/hop-response') {
      response.writeHead(200, {
        connection: 'x-resp-hop',
        'x-resp-hop': '1',
        'keep-alive': 'timeout=5, max=77',
        upgrade: 'h2c',
        'x-resp-end-to-end': 'kept',
        'content-type': 'text/plain'
      })
      response.end('hop')
      return
    }
    if (path === '/v4/stream') {
      response.writeHead(200, { 'content-type': 'text/plain' })
      response.write('first-chunk;')
      void releaseStream.promise.then(() => response.end('rest'))
      return
    }
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify({ ok: true, path }))
  }

  const upstream = useRecordingUpstream(handler)
  const gw = useGateway(() =>
    testConfig(upstream.url, {
      log: { level: 'silent' },
      tenants: {
        acme: {
          upstream: { staging: upstream.url },
          legacy: { deprecation: { date: '2026-07-01T00:00:00Z', sunset: '2027-07-01T00:00:00Z', link: 'https://example.com/docs/v4-migration' } }
        }
      }
    })
  )
  // Runs before the gateway closes (after-hooks run last first): a held stream would keep it open.
  afterAll(() => {
    releaseStream.resolve()
  })
  beforeEach(() => {
    upstream.requests.length = 0
  })

  function only(): RecordedRequest {
    expect(upstream.requests).toHaveLength(1)
    return upstream.requests[0] as RecordedRequest
  }

  describe('request line and body', () => {
    it('forwards a GET with its path and raw query unchanged', async () => {
      await send(gw.url, '/v4/policies/p%2F1?b=2&a=1&a=%20x&empty=')
      expect(only()).toMatchObject({ method: 'GET', url: '/v4/policies/p%2F1?b=2&a=1&a=%20x&empty=' })
    })

    it('forwards an empty query, a bare "?", unchanged', async () => {
      // Raw: an HTTP client's URL handling drops a bare "?" before it is sent.
      const result = await exchangeRaw(gw.url, 'GET /v4/policies? HTTP/1.1\r\nHost: gw.test\r\nConnection: close\r\n\r\n')
      expect(result.response?.status).toBe(200)
      expect(only()).toMatchObject({ method: 'GET', url: '/v4/policies?' })
    })

    it('forwards a PUT with its JSON body byte for byte', async () => {
      const body = '{ "name" : "strict",\n "rules": [1, 2] }'
      await send(gw.url, '/v4/policies/strict', { method: 'PUT', body, headers: { 'content-type': 'application/json' } })
      const recorded = only()
      expect(recorded.method).toBe('PUT')
      expect(recorded.url).toBe('/v4/policies/strict')
      expect(recorded.body.toString('utf8')).toBe(body)
    })

    it('forwards a DELETE with its query', async () => {
      await send(gw.url, '/v4/policies/strict?force=true', { method: 'DELETE' })
      expect(only()).toMatchObject({ method: 'DELETE', url: '/v4/policies/strict?force=true' })
    })

    it('forwards a PATCH', async () => {
      await send(gw.url, '/v4/policies/strict', { method: 'PATCH', body: '{"a":1}', headers: { 'content-type': 'application/merge-patch+json' } })
      const recorded = only()
      expect(recorded.method).toBe('PATCH')
      expect(recorded.headers['content-type']).toBe('application/merge-patch+json')
    })

    it('forwards a binary body unchanged', async () => {
      const body = Buffer.from(Array.from({ length: 4096 }, (_value, index) => index % 256))
      await send(gw.url, '/v4/blobs', { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } })
      expect(only().body.equals(body)).toBe(true)
    })

    it('forwards a body without a content-type unchanged', async () => {
      await send(gw.url, '/v4/blobs', { method: 'POST', body: 'plain bytes' })
      expect(only().body.toString('utf8')).toBe('plain bytes')
    })

    it('forwards a 20 MiB body although limits.bodyBytes is 1 MiB (native bodies are not limited)', async () => {
      const body = randomBytes(20 * 1024 * 1024)
      const answer = await send(gw.url, '/v4/blobs/large', { method: 'PUT', body, headers: { 'content-type': 'application/octet-stream' } })
      expect(answer.status).toBe(200)
      const recorded = only()
      expect(recorded.body.length).toBe(body.length)
      expect(createHash('sha256').update(recorded.body).digest('hex')).toBe(createHash('sha256').update(body).digest('hex'))
    })
  })

  describe('end-to-end headers', () => {
    it('forwards credentials exactly as sent (native traffic is never rewritten)', async () => {
      await send(gw.url, '/v4/policies', {
        headers: { authorization: 'Token demo-token-alice', 'x-service-api-key': 'key_demo_admin', 'x-api-key': 'sa_demo', 'x-session-token': 'other-token' }
      })
      const headers = only().headers
      expect(headers.authorization).toBe('Token demo-token-alice')
      expect(headers['x-service-api-key']).toBe('key_demo_admin')
      expect(headers['x-api-key']).toBe('sa_demo')
      expect(headers['x-session-token']).toBe('other-token')
    })

    it('forwards custom, accept, user-agent and cookie headers unchanged', async () => {
      await send(gw.url, '/v4/policies', {
        headers: { 'x-custom': 'a, b', accept: 'application/problem+json', 'user-agent': 'legacy-client/1.2', cookie: 'sid=abc; theme=dark' }
      })
      const headers = only().headers
      expect(headers['x-custom']).toBe('a, b')
      expect(headers.accept).toBe('application/problem+json')
      expect(headers['user-agent']).toBe('legacy-client/1.2')
      expect(headers.cookie).toBe('sid=abc; theme=dark')
    })

    it('forwards every copy of a field sent twice, those Node keeps once (Authorization, User-Agent) included', async () => {
      const response = await rawExchange(
        gw.url,
        'GET /v4/twice HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer first-token\r\nUser-Agent: one/1\r\nx-many: a\r\n' +
          'authorization: Bearer second-token\r\nUser-Agent: two/2\r\nx-many: b\r\nConnection: close\r\n\r\n'
      )
      expect(response).toMatch(/^HTTP\/1\.1 200 /)
      const raw = only().rawHeaders
      const copies = (name: string): string[] => raw.filter((_value, index) => index % 2 === 1 && (raw[index - 1] as string).toLowerCase() === name)
      expect(copies('authorization')).toEqual(['Bearer first-token', 'Bearer second-token'])
      expect(copies('user-agent')).toEqual(['one/1', 'two/2'])
      expect(copies('x-many').join(', ')).toBe('a, b')
    })

    it('removes the headers that Connection names, keep-alive, te and upgrade on the way to the upstream', async () => {
      const response = await rawExchange(
        gw.url,
        'GET /v4/hop-request HTTP/1.1\r\nHost: gateway.test\r\nConnection: close, x-custom-hop\r\nx-custom-hop: 1\r\n' +
          'Keep-Alive: timeout=99\r\nTE: trailers\r\nUpgrade: h2c\r\nProxy-Connection: keep-alive\r\nx-end-to-end: kept\r\n\r\n'
      )
      expect(response).toMatch(/^HTTP\/1\.1 200 /)
      const headers = only().headers
      expect(headers['x-end-to-end']).toBe('kept')
      expect(headers).not.toHaveProperty('x-custom-hop')
      expect(headers['keep-alive']).toBeUndefined()
      expect(headers.te).toBeUndefined()
      expect(headers.upgrade).toBeUndefined()
      expect(headers['proxy-connection']).toBeUndefined()
      expect(headers.connection ?? '').not.toMatch(/x-custom-hop|close/i)
    })

    it('removes hop-by-hop headers of the upstream response before the client', async () => {
      const answer = await send(gw.url, '/v4/hop-response')
      expect(answer.status).toBe(200)
      expect(answer.text).toBe('hop')
      expect(answer.headers['x-resp-end-to-end']).toBe('kept')
      expect(answer.headers['x-resp-hop']).toBeUndefined()
      expect(answer.headers.upgrade).toBeUndefined()
      expect(answer.headers['keep-alive']).not.toBe('timeout=5, max=77')
      expect(String(answer.headers.connection ?? '')).not.toContain('x-resp-hop')
    })

    it('appends the client address to an incoming x-forwarded-for list', async () => {
      await send(gw.url, '/v4/policies', { headers: { 'x-forwarded-for': '203.0.113.7, 198.51.100.2' } })
      expect(only().headers['x-forwarded-for']).toBe('203.0.113.7, 198.51.100.2, 127.0.0.1')
    })

    it('drops an incoming x-forwarded-for list the client\'s Connection header names: it was for that hop only (RFC 9110 7.6.1)', async () => {
      const response = await rawExchange(gw.url, 'GET /v4/policies HTTP/1.1\r\nHost: gateway.test\r\nConnection: close, x-forwarded-for\r\nX-Forwarded-For: 10.0.0.9\r\n\r\n')
      expect(response).toMatch(/^HTTP\/1\.1 200 /)
      expect(only().headers['x-forwarded-for']).toBe('127.0.0.1')
    })

    it('sets x-forwarded-for to the client address when there is none', async () => {
      await send(gw.url, '/v4/policies')
      expect(only().headers['x-forwarded-for']).toBe('127.0.0.1')
    })

    it('sets x-forwarded-proto to http', async () => {
      await send(gw.url, '/v4/policies', { headers: { 'x-forwarded-proto': 'https' } })
      expect(only().headers['x-forwarded-proto']).toBe('http')
    })

    it('sets x-forwarded-host to the incoming Host', async () => {
      await send(gw.url, '/v4/policies', { headers: { host: 'legacy.example.com:8080' } })
      expect(only().headers['x-forwarded-host']).toBe('legacy.example.com:8080')
    })

    it('adds an x-request-id when the client sent none', async () => {
      await send(gw.url, '/v4/policies')
      expect(only().headers['x-request-id']).toMatch(UUID)
    })

    it('keeps the x-request-id the client sent', async () => {
      await send(gw.url, '/v4/policies', { headers: { 'x-request-id': 'client-req-1' } })
      expect(only().headers['x-request-id']).toBe('client-req-1')
    })
  })

  describe('responses', () => {
    it('returns an upstream 418 with its headers and body unchanged', async () => {
      const answer = await send(gw.url, '/v4/teapot')
      expect(answer.status).toBe(418)
      expect(answer.headers['x-teapot']).toBe('short and stout')
      expect(answer.headers['cache-control']).toBe('no-store')
      expect(answer.headers['content-type']).toBe('text/plain')
      expect(answer.text).toBe('I am a teapot')
    })

    it('does not add an x-request-id to a native upstream response', async () => {
      const answer = await send(gw.url, '/v4/teapot', { headers: { 'x-request-id': 'client-req-2' } })
      expect(answer.headers['x-request-id']).toBeUndefined()
    })

    it('passes an upstream 503 on a GET through once, without retrying it', async () => {
      const answer = await send(gw.url, '/v4/unavailable')
      expect(answer.status).toBe(503)
      // SPEC 6: errors of the V4 backend are passed through, never rewritten: byte for byte.
      expect(answer.text).toBe(V4_ERROR_BYTES)
      expect(answer.headers['content-type']).toBe('application/json')
      expect(upstream.requests).toHaveLength(1)
    })

    it('adds no Deprecation, Sunset or Link header to a native response of a tenant with legacy.deprecation', async () => {
      const answer = await send(gw.url, '/v4/policies')
      expect(answer.status).toBe(200)
      expect(answer.headers.deprecation).toBeUndefined()
      expect(answer.headers.sunset).toBeUndefined()
      expect(answer.headers.link).toBeUndefined()
    })

    it('adds Deprecation to a legacy response of the same tenant (control for the native case)', async () => {
      const answer = await send(gw.url, '/v1/headless/runs', { headers: { authorization: 'Bearer tok' }, json: { input: 1 } })
      expect(answer.status).toBe(200)
      expect(answer.headers.deprecation).toBe('@1782864000')
    })

    it('streams the response: the client reads the first chunk before the upstream writes the rest', async () => {
      releaseStream = deferred()
      const response = await within(
        undiciRequest(new URL('/v4/stream', gw.url), { dispatcher: streamingAgent }),
        3_000,
        'the gateway held the response headers back until the upstream ended'
      )
      expect(response.statusCode).toBe(200)
      const reader = response.body[Symbol.asyncIterator]()
      const first = await within(reader.next(), 3_000, 'the gateway buffered the response: no chunk before the upstream ended')
      expect(Buffer.from(first.value as Buffer).toString('utf8')).toBe('first-chunk;')
      releaseStream.resolve()
      let rest = ''
      for (let next = await reader.next(); next.done !== true; next = await reader.next()) rest += Buffer.from(next.value as Buffer).toString('utf8')
      expect(rest).toBe('rest')
    })
  })
})

describe('native request body streaming', () => {
  let sawFirstChunk = deferred()
  let received = ''
  const upstream = useHttpServer((request: IncomingMessage, response: ServerResponse) => {
    received = ''
    request.on('data', (chunk: Buffer) => {
      received += chunk.toString('utf8')
      sawFirstChunk.resolve()
    })
    request.on('end', () => {
      response.writeHead(200, { 'content-type': 'text/plain' })
      response.end(`received ${received.length} bytes`)
    })
  })
  const gw = useGateway(() => testConfig(upstream.url, { log: { level: 'silent' } }))

  it('streams the request body: the upstream sees the first chunk before the client ends the body', async () => {
    sawFirstChunk = deferred()
    const seen = sawFirstChunk.promise
    async function* body(): AsyncGenerator<Buffer> {
      yield Buffer.from('first-chunk;')
      await within(seen, 3_000, 'the gateway buffered the request body: the upstream saw nothing before the client ended it')
      yield Buffer.from('rest')
    }
    const response = await undiciRequest(new URL('/v4/uploads', gw.url), {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: Readable.from(body()),
      dispatcher: streamingAgent
    })
    expect(response.statusCode).toBe(200)
    expect(await response.body.text()).toBe('received 16 bytes')
    expect(received).toBe('first-chunk;rest')
  })
})

describe('native upstream failures', () => {
  const stalled = useRecordingUpstream(() => {
    // Never answers.
  })
  const gw = useGateway(async () => ({
    log: { level: 'silent' },
    limits: { upstreamTimeoutMs: 200 },
    tenants: {
      // A port that was just free: nothing listens there any more.
      refused: { upstream: { staging: await refusingOrigin() } },
      stalled: { upstream: { staging: stalled.url } }
    }
  }))

  function expectErrorEnvelope(answer: Awaited<ReturnType<typeof send>>, code: string): void {
    expect(answer.headers['content-type']).toMatch(/^application\/json/)
    expect(answer.json.error.code).toBe(code)
    expect(typeof answer.json.error.message).toBe('string')
    expect(answer.json.error.requestId).toBe(answer.headers['x-request-id'])
    expect(answer.json.meta.requestId).toBe(answer.json.error.requestId)
    expect(typeof answer.json.meta.timingMs.total).toBe('number')
  }

  it('answers 502 UPSTREAM_UNAVAILABLE in the error envelope when the upstream refuses the connection', async () => {
    const answer = await send(gw.url, '/v4/policies', { headers: { 'x-tenant-id': 'refused', 'x-request-id': 'refused-1' } })
    expect(answer.status).toBe(502)
    expectErrorEnvelope(answer, 'UPSTREAM_UNAVAILABLE')
    expect(answer.json.error.requestId).toBe('refused-1')
  })

  it('answers 504 UPSTREAM_TIMEOUT in the error envelope when the upstream stalls past limits.upstreamTimeoutMs', async () => {
    const startedAt = performance.now()
    const answer = await send(gw.url, '/v4/policies', { headers: { 'x-tenant-id': 'stalled' } })
    expect(answer.status).toBe(504)
    expectErrorEnvelope(answer, 'UPSTREAM_TIMEOUT')
    expect(performance.now() - startedAt).toBeLessThan(5_000)
  })
})

describe('interim (1xx) answers from the upstream', () => {
  const LINK = '</styles.css>; rel=preload; as=style'
  const SECOND_LINK = '</app.js>; rel=preload; as=script'
  // 103 Early Hints, then 102 Processing, then the final answer: undici reports all three.
  const upstream = useRecordingUpstream((_request, response) => {
    response.writeEarlyHints({ link: [LINK, SECOND_LINK] })
    response.writeProcessing()
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify({ output: 'final', meta: { requestId: 'r', timingMs: { total: 1 } } }))
  })
  const gw = useGateway(() => testConfig(upstream.url, { log: { level: 'silent' } }))

  it('passes a 103 Early Hints on (RFC 9110 15.2) and then the final answer, on native traffic', async () => {
    const result = await exchangeRaw(gw.url, 'GET /v4/policies HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n')
    const text = result.bytes.toString('latin1')
    expect(text.startsWith('HTTP/1.1 103 Early Hints\r\n')).toBe(true)
    // Node writes the upstream's two links as one comma-joined line, which its writeEarlyHints then refuses whole.
    expect(text).toContain(`Link: ${LINK}, ${SECOND_LINK}\r\n`)
    expect(text).not.toContain('HTTP/1.1 102')
    const final = parseRawResponse(result.bytes.subarray(text.indexOf('\r\n\r\n') + 4), result.closedByServer)
    expect(final?.status).toBe(200)
    expect(final?.complete).toBe(true)
    expect(final?.json).toEqual({ output: 'final', meta: { requestId: 'r', timingMs: { total: 1 } } })
  })

  it('sends no 103 to an HTTP/1.0 client, which would read it as the answer (RFC 9110 15)', async () => {
    const result = await exchangeRaw(gw.url, 'GET /v4/policies HTTP/1.0\r\nHost: gateway.test\r\n\r\n')
    expect(result.bytes.toString('latin1')).not.toContain(' 103 ')
    expect(result.response?.status).toBe(200)
  })

  it('answers a legacy call with the final answer, not the interim one', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { authorization: 'Bearer tok_interim' }, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(answer.json.output).toBe('final')
  })
})

describe('interim (1xx) answers to a request pipelined behind another', () => {
  // Node buffers what is written to an answer still queued, and puts the final status line in
  // front of the buffer with the first body chunk: a 1xx written then would land inside the answer.
  const LINK = '</a.css>; rel=preload'
  const upstream = useRecordingUpstream((request, response) => {
    const path = request.url
    if (path === '/v4/slow') {
      setTimeout(() => response.writeHead(200, { 'content-length': 4 }).end('slow'), 300)
    } else if (path === '/v4/hint-then-answer' || path === '/v4/hint-then-wait') {
      response.writeEarlyHints({ link: LINK })
      const answer = (): void => void response.writeHead(200, { 'content-type': 'text/plain', 'content-length': 5 }).end('hello')
      if (path === '/v4/hint-then-answer') answer()
      else setTimeout(answer, 600)
    } else if (path === '/v4/execute') {
      const body = JSON.stringify({ output: 'ran', meta: { requestId: 'r', timingMs: { total: 1 } } })
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body)
    } else {
      response.writeHead(201, { 'content-length': 7 }).end('created')
    }
  })
  const gw = useGateway(() => testConfig(upstream.url, { log: { level: 'silent' } }))

  function pipelined(second: string): Promise<string> {
    return rawExchange(gw.url, `GET /v4/slow HTTP/1.1\r\nHost: gateway.test\r\n\r\n${second}`)
  }

  /** The answers in `text`, each cut at its declared length: a 1xx inside one shows up as its body. */
  function answers(text: string): Array<{ head: string; body: string }> {
    const found: Array<{ head: string; body: string }> = []
    let rest = text
    while (rest.length > 0) {
      const end = rest.indexOf('\r\n\r\n')
      if (end === -1) break
      const head = rest.slice(0, end)
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0)
      found.push({ head, body: rest.slice(end + 4, end + 4 + length) })
      rest = rest.slice(end + 4 + length)
    }
    return found
  }

  it('drops a 103 whose final answer is ready before its turn, instead of writing it inside that answer', async () => {
    const text = await pipelined('GET /v4/hint-then-answer HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n')
    const [first, second, ...more] = answers(text)
    expect(first?.body).toBe('slow')
    expect(second?.head.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    expect(second?.body).toBe('hello')
    expect(more).toEqual([])
  })

  it('writes a 103 once the answer reaches the wire, ahead of a final answer that comes later', async () => {
    const text = await pipelined('GET /v4/hint-then-wait HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n')
    const [first, hint, final, ...more] = answers(text)
    expect(first?.body).toBe('slow')
    expect(hint?.head).toBe(`HTTP/1.1 103 Early Hints\r\nLink: ${LINK}`)
    expect(final?.head.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    expect(final?.body).toBe('hello')
    expect(more).toEqual([])
  })

  it('writes a 100 Continue in its turn, never inside the answer to the request that waited for it', async () => {
    const text = await pipelined('POST /v4/echo HTTP/1.1\r\nHost: gateway.test\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n{}')
    const found = answers(text)
    expect(found[0]?.body).toBe('slow')
    const last = found[found.length - 1]
    expect(last?.head.startsWith('HTTP/1.1 201 Created\r\n')).toBe(true)
    expect(last?.body).toBe('created')
    // Between the two, at most the 100 itself.
    expect(found.slice(1, -1).map((answer) => answer.head)).toEqual(found.length === 3 ? ['HTTP/1.1 100 Continue'] : [])
    expect(upstream.requests.find((request) => request.url === '/v4/echo')?.body.toString()).toBe('{}')
  })

  it('does the same for a legacy call, whose body the gateway reads itself', async () => {
    const body = '{"input":1}'
    const text = await pipelined(
      `POST /v1/headless/runs HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer tok_pipelined\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n${body}`
    )
    const found = answers(text)
    expect(found[0]?.body).toBe('slow')
    const last = found[found.length - 1]
    expect(last?.head.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    expect(JSON.parse(last?.body ?? '')).toMatchObject({ output: 'ran' })
    expect(found.slice(1, -1).map((answer) => answer.head)).toEqual(found.length === 3 ? ['HTTP/1.1 100 Continue'] : [])
  })
})

describe('trailer fields of a chunked upstream answer', () => {
  // Written as raw bytes: Node's own server would refuse to announce trailers on a 204 or next to a length.
  const ANSWERS: Record<string, string> = {
    '/v4/trailers': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTrailer: x-checksum\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nx-checksum: sha256=2cf24d\r\n\r\n',
    '/v4/no-content': 'HTTP/1.1 204 No Content\r\nTrailer: x-checksum\r\n\r\n',
    '/v4/with-length': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nTrailer: x-checksum\r\n\r\nhello',
    '/v4/hop-trailer': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: x-digest\r\nTrailer: x-checksum, x-digest\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nx-checksum: sha256=2cf24d\r\nx-digest: hop-only\r\n\r\n'
  }
  const upstream = useFaultUpstream((exchange) => {
    const path = exchange.url
    const answer = exchange.method === 'HEAD' ? 'HTTP/1.1 200 OK\r\nTrailer: x-checksum\r\nTransfer-Encoding: chunked\r\n\r\n' : ANSWERS[path]
    exchange.socket.end(answer ?? 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n')
  })
  const gw = useGateway(() => testConfig(upstream.url, { log: { level: 'silent' } }))

  function get(path: string, version = '1.1', method = 'GET'): Promise<string> {
    return rawExchange(gw.url, `${method} ${path} HTTP/${version}\r\nHost: gateway.test\r\nConnection: close\r\n\r\n`)
  }

  it('passes the trailers on after the last chunk, announced as the upstream announced them', async () => {
    const text = await get('/v4/trailers')
    const [head, body] = text.split('\r\n\r\n', 2) as [string, string]
    expect(head.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    expect(head).toMatch(/\r\nTrailer: x-checksum\r\n/i)
    expect(head).toMatch(/\r\nTransfer-Encoding: chunked/i)
    expect(text.slice(head.length + 4)).toBe('5\r\nhello\r\n0\r\nx-checksum: sha256=2cf24d\r\n\r\n')
    expect(body.startsWith('5\r\nhello')).toBe(true)
  })

  it('drops a trailer field the answer\'s Connection header names (RFC 9110 7.6.1), and passes the others', async () => {
    const answer = await undiciRequest(`${gw.url}/v4/hop-trailer`, { dispatcher: streamingAgent })
    expect(await answer.body.text()).toBe('hello')
    expect(answer.trailers).toEqual({ 'x-checksum': 'sha256=2cf24d' })
  })

  it('reads the same through an HTTP client: the trailers arrive with the body', async () => {
    const answer = await undiciRequest(`${gw.url}/v4/trailers`, { dispatcher: streamingAgent })
    expect(await answer.body.text()).toBe('hello')
    expect(answer.trailers).toEqual({ 'x-checksum': 'sha256=2cf24d' })
  })

  it('sends an HTTP/1.0 client the body without chunks, the announcement or the trailers', async () => {
    const text = await get('/v4/trailers', '1.0')
    expect(text.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    expect(text).not.toMatch(/trailer:|x-checksum|transfer-encoding/i)
    expect(text.endsWith('\r\n\r\nhello')).toBe(true)
  })

  it('sends no trailers to an HTTP/1.0 client that asks for chunks (TE: chunked), as it sends no announcement', async () => {
    const text = await rawExchange(gw.url, 'GET /v4/trailers HTTP/1.0\r\nHost: gateway.test\r\nTE: chunked\r\n\r\n')
    expect(text.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    expect(text).toMatch(/\r\nTransfer-Encoding: chunked\r\n/i)
    expect(text).not.toMatch(/trailer:|x-checksum/i)
    expect(text.endsWith('5\r\nhello\r\n0\r\n\r\n')).toBe(true)
  })

  it('drops the announcement from answers that cannot carry trailers: a 204, a HEAD, a length', async () => {
    const noContent = await get('/v4/no-content')
    expect(noContent.startsWith('HTTP/1.1 204 No Content\r\n')).toBe(true)
    const head = await get('/v4/trailers', '1.1', 'HEAD')
    expect(head.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    const withLength = await get('/v4/with-length')
    expect(withLength.startsWith('HTTP/1.1 200 OK\r\n')).toBe(true)
    expect(withLength).toMatch(/\r\nContent-Length: 5\r\n/i)
    expect(withLength.endsWith('\r\n\r\nhello')).toBe(true)
    for (const text of [noContent, head, withLength]) expect(text).not.toMatch(/\r\ntrailer:/i)
  })
})

describe('a malformed request on a connection whose answer is still streaming', () => {
  const FIRST_HALF = '{"part":"one",'
  const SECOND_HALF = '"rest":"two"}'
  const upstream = useRecordingUpstream((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': FIRST_HALF.length + SECOND_HALF.length })
    response.write(FIRST_HALF)
    setTimeout(() => response.end(SECOND_HALF), 300)
  })
  const gw = useGateway(() => testConfig(upstream.url, { log: { level: 'silent' } }))

  function pipelineBadRequest(whenSeen: string): Promise<string> {
    const { port } = new URL(gw.url)
    return new Promise((resolve) => {
      let text = ''
      let sent = false
      const socket = connect(Number(port), '127.0.0.1', () => {
        socket.write('GET /v4/slow HTTP/1.1\r\nHost: gateway.test\r\n\r\n')
        if (whenSeen === '') {
          sent = true
          socket.write('NOT A REQUEST LINE\r\n\r\n')
        }
      })
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString('latin1')
        if (!sent && text.includes(whenSeen)) {
          sent = true
          socket.write('NOT A REQUEST LINE\r\n\r\n')
        }
      })
      socket.on('error', () => undefined)
      socket.on('close', () => resolve(text))
    })
  }

  /** The streamed answer whole, then the malformed request's 400 after it, then the end (docs/decisions.md, framing errors). */
  function expectAnswerThen400(text: string): void {
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
    const bodyStart = text.indexOf('\r\n\r\n') + 4
    expect(text.slice(bodyStart, bodyStart + FIRST_HALF.length + SECOND_HALF.length)).toBe(FIRST_HALF + SECOND_HALF)
    expect(text.slice(bodyStart + FIRST_HALF.length + SECOND_HALF.length)).toMatch(/^HTTP\/1\.1 400 [^]*"INVALID_REQUEST"/)
    expect(text.match(/HTTP\/1\.1 \d{3} /g)).toHaveLength(2)
  }

  it('writes its 400 after an answer whose body is streaming, never into it', async () => {
    expectAnswerThen400(await pipelineBadRequest(FIRST_HALF))
  })

  it('answers 400 only after the first answer, where the client waits for it', async () => {
    // Read as the first request's answer, a 400 would blame a request that was fine.
    expectAnswerThen400(await pipelineBadRequest(''))
  })
})
