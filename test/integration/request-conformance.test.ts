import type { IncomingMessage } from 'node:http'
import { connect } from 'node:net'
import { beforeAll, describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { buildRawRequest, rawExchange, type RawHeader, type RawResult } from '../helpers/raw-http.js'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'
import { until } from '../helpers/until.js'

/*
 * What RFC 9110/9112 ask of a server about the request it reads, sent as raw bytes on fresh
 * sockets: the Host field's syntax, the request target's form, percent-encoded octets in a path,
 * and framing errors that must end the connection after exactly one answer.
 */

const EXECUTE = '/v1/headless/runs'
const LEGACY_HEADERS: RawHeader[] = [['Authorization', 'Bearer conformance-token'], ['Content-Type', 'application/json']]

const upstream = useRecordingUpstream()
const gw = useGateway(() => testConfig(upstream.url, { internalAdmin: { pathPrefixes: ['/internal', '/v4/internal'] } }))

/**
 * Sends `bytes` on a fresh connection and returns what came back and every request that reached
 * the upstream meanwhile, its head as it arrived (a call cancelled by the close counts too).
 */
async function exchange(bytes: Buffer, timeoutMs = 2_000): Promise<{ result: RawResult; forwarded: string[] }> {
  const forwarded: string[] = []
  const onRequest = (request: IncomingMessage): void => void forwarded.push(`${request.method} ${request.url}`)
  upstream.server.on('request', onRequest)
  try {
    const result = await rawExchange(gw.url, bytes, { timeoutMs })
    // A request the gateway began just before the connection closed may still be on its way.
    await new Promise((resolve) => setTimeout(resolve, 50))
    return { result, forwarded }
  } finally {
    upstream.server.off('request', onRequest)
    headsInExchanges += forwarded.length
  }
}

/**
 * Every head that reached the upstream, and those an exchange saw: a forward that came after its
 * exchange's window would be missing from its `forwarded`, which a test may expect empty. The
 * last test of the file holds the two equal.
 */
let headsAtUpstream = 0
let headsInExchanges = 0
beforeAll(() => {
  upstream.server.on('request', () => headsAtUpstream++)
})

/** Requests the traffic listener has counted (v4gw_requests_total, every label set). */
async function requestsCounted(): Promise<number> {
  const text = (await send(gw.adminUrl, '/metrics')).text
  return [...text.matchAll(/^v4gw_requests_total\{[^}]*\} (\d+)$/gm)].reduce((sum, match) => sum + Number(match[1]), 0)
}

/** The status of every answer on the connection, in order (the gateway's bodies never hold a status line). */
function statuses(result: RawResult): number[] {
  return [...result.bytes.toString('latin1').matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((match) => Number(match[1]))
}

/** One 400 INVALID_REQUEST in the SPEC 6 envelope, `connection: close`, then the gateway closed. */
function expectOneRefusalThenClose(result: RawResult): void {
  const text = result.bytes.toString('latin1')
  expect(statuses(result), text).toEqual([400])
  expect(result.response?.json?.error?.code).toBe('INVALID_REQUEST')
  expect(result.response?.headers.connection).toBe('close')
  expect(result.closedByServer, text).toBe(true)
  expect(result.timedOut).toBe(false)
}

describe('Host (RFC 9112 3.2, RFC 9110 7.2: uri-host [ ":" port ])', () => {
  const INVALID_HOSTS = ['example.com.:1.2', '123.40.56.78:9000:80', 'gateway.test:80x', '[::1]:8080:80', 'user:secret@gateway.test', 'gate way.test']

  it.each(INVALID_HOSTS)('answers 400 and closes on a native request with Host %j, forwarding nothing', async (host) => {
    const { result, forwarded } = await exchange(buildRawRequest('GET /v4/host-check HTTP/1.1', [['Host', host]]))
    expectOneRefusalThenClose(result)
    expect(result.response?.json.error.details).toEqual([{ pointer: 'header:host', message: expect.any(String) }])
    expect(forwarded).toEqual([])
  })

  it.each(INVALID_HOSTS)('answers 400 and closes on a legacy call with Host %j, forwarding nothing', async (host) => {
    const { result, forwarded } = await exchange(buildRawRequest(`POST ${EXECUTE} HTTP/1.1`, [['Host', host], ...LEGACY_HEADERS, ['Content-Length', '11']], '{"input":1}'))
    expectOneRefusalThenClose(result)
    expect(forwarded).toEqual([])
  })

  it.each(['gateway.test', 'gateway.test.', 'gateway.test.:8080', '127.0.0.1:9000', '[::1]', '[::1]:8080', '[2001:db8::1]:443', ''])(
    'forwards a native request with Host %j, passing it on as x-forwarded-host',
    async (host) => {
      const { result, forwarded } = await exchange(buildRawRequest('GET /v4/host-check HTTP/1.1', [['Host', host], ['Connection', 'close']]))
      expect(result.response?.status, result.bytes.toString('latin1')).toBe(200)
      expect(forwarded).toEqual(['GET /v4/host-check'])
      expect(upstream.requests.at(-1)?.headers['x-forwarded-host']).toBe(host)
    }
  )

  it('drops a client\'s x-forwarded-host from a request without Host (HTTP/1.0): the header names the incoming Host, or nothing', async () => {
    const { result, forwarded } = await exchange(buildRawRequest('GET /v4/no-host HTTP/1.0', [['X-Forwarded-Host', 'evil.example']]))
    expect(result.response?.status, result.bytes.toString('latin1')).toBe(200)
    expect(forwarded).toEqual(['GET /v4/no-host'])
    expect(upstream.requests.at(-1)?.headers['x-forwarded-host']).toBeUndefined()
  })

  it('is refused by explain as by the listener', async () => {
    const explained = await send(gw.adminUrl, '/admin/explain', { json: { method: 'GET', path: '/v4/host-check', headers: { host: '123.40.56.78:9000:80' } } })
    expect(explained.json.answer).toMatchObject({ status: 400, code: 'INVALID_REQUEST' })
  })
})

describe('request target (RFC 9112 3.2.1: origin-form has no fragment)', () => {
  it.each(['/v4/x?a=1#frag', '/v4/x#frag', '/v4/x#'])('answers 400 to the native target %j and forwards nothing', async (target) => {
    const { result, forwarded } = await exchange(buildRawRequest(`GET ${target} HTTP/1.1`, [['Host', 'gateway.test'], ['Connection', 'close']]))
    expect(statuses(result), result.bytes.toString('latin1')).toEqual([400])
    expect(result.response?.json.error).toMatchObject({ code: 'INVALID_REQUEST', details: [{ pointer: 'request-target' }] })
    expect(forwarded).toEqual([])
  })

  it('answers 400 to a legacy call whose target has a fragment', async () => {
    const { result, forwarded } = await exchange(buildRawRequest(`POST ${EXECUTE}#frag HTTP/1.1`, [['Host', 'gateway.test'], ...LEGACY_HEADERS, ['Content-Length', '11'], ['Connection', 'close']], '{"input":1}'))
    expect(result.response?.json?.error?.code, result.bytes.toString('latin1')).toBe('INVALID_REQUEST')
    expect(forwarded).toEqual([])
  })

  it('forwards an encoded # (%23) as it came', async () => {
    const { result, forwarded } = await exchange(buildRawRequest('GET /v4/a%23b?q=%23 HTTP/1.1', [['Host', 'gateway.test'], ['Connection', 'close']]))
    expect(result.response?.status).toBe(200)
    expect(forwarded).toEqual(['GET /v4/a%23b?q=%23'])
  })

  it('is refused by explain as by the listener', async () => {
    const explained = await send(gw.adminUrl, '/admin/explain', { json: { method: 'GET', path: '/v4/x?a=1#frag', headers: { host: 'gateway.test' } } })
    expect(explained.json.answer).toMatchObject({ status: 400, code: 'INVALID_REQUEST' })
  })
})

describe('percent-encoded octets that are not UTF-8 (RFC 3986 2.1, SPEC 7: the path goes on unchanged)', () => {
  it.each(['/v4/files/file-%FF%FE.bin', '/v4/files/%E9t%E9.txt?name=%FF', '/v4/files/caf%C3%A9-%FF'])('forwards %j as it came', async (target) => {
    const { result, forwarded } = await exchange(buildRawRequest(`GET ${target} HTTP/1.1`, [['Host', 'gateway.test'], ['Connection', 'close']]))
    expect(result.response?.status, result.bytes.toString('latin1')).toBe(200)
    expect(forwarded).toEqual([`GET ${target}`])
  })

  it.each(['/internal%FF', '/%69ntern%FFal/x', '/v4/%FF/../internal', '/v4/%FF%2e%2e/internal', '/v4/%c0%ae%c0%ae/internal', '/v4/%FF%zz'])(
    'still refuses %j, forwarding nothing',
    async (target) => {
      const { result, forwarded } = await exchange(buildRawRequest(`GET ${target} HTTP/1.1`, [['Host', 'gateway.test'], ['Connection', 'close']]))
      expect(result.response?.json?.error?.code, result.bytes.toString('latin1')).toBe(target.startsWith('/v4/') ? 'INVALID_REQUEST' : 'FORBIDDEN')
      expect(forwarded).toEqual([])
    }
  )

  it('is planned by explain as by the listener', async () => {
    const explained = await send(gw.adminUrl, '/admin/explain', { json: { method: 'GET', path: '/v4/files/file-%FF%FE.bin', headers: { host: 'gateway.test' } } })
    expect(explained.json.answer).toBeUndefined()
  })
})

describe('framing errors: exactly one answer, then the connection closes (RFC 9112 6.3, 9.6, 11.2)', () => {
  const NEXT = 'GET /v4/pipelined HTTP/1.1\r\nHost: gateway.test\r\n\r\n'
  const CHUNKED_BODY = '5\r\nhello\r\n0\r\n\r\n'
  const TARGETS = [
    ['legacy', EXECUTE, LEGACY_HEADERS],
    ['native', '/v4/framing', [['Content-Type', 'application/json']]]
  ] as const

  for (const [kind, target, headers] of TARGETS) {
    it.each(['xchunked', 'identity', 'chunked, identity'])(`answers a ${kind} request with Transfer-Encoding %j once, and reads nothing after it`, async (codings) => {
      const { result, forwarded } = await exchange(buildRawRequest(`POST ${target} HTTP/1.1`, [['Host', 'gateway.test'], ...headers, ['Transfer-Encoding', codings]], CHUNKED_BODY + NEXT))
      expectOneRefusalThenClose(result)
      expect(forwarded).toEqual([])
    })
  }

  it.each([
    ['an invalid Host', [['Host', '123.40.56.78:9000:80'], ['Content-Length', '2']], '{}'],
    ['Transfer-Encoding gzip, chunked', [['Host', 'gateway.test'], ['Transfer-Encoding', 'gzip, chunked']], CHUNKED_BODY]
  ] as const)('serves no request pipelined behind one refused for %s', async (_name, lines, body) => {
    const before = await requestsCounted()
    const { result, forwarded } = await exchange(buildRawRequest('POST /v4/framing HTTP/1.1', lines, body + NEXT))
    expectOneRefusalThenClose(result)
    expect(forwarded).toEqual([])
    // The pipelined request was not even begun (an upstream call would be cut short by the close).
    expect(await requestsCounted()).toBe(before + 1)
  })

  it.each([
    ['a blocked path', '/internal/x', [], 403],
    ['an unknown path', '/v3/x', [], 404],
    ['a legacy call without a credential', EXECUTE, [['Content-Type', 'application/json']], 401]
  ] as const)('answers %s once when its chunked body turns out malformed after the answer, then closes', async (_name, target, headers, status) => {
    const { result, forwarded } = await exchange(buildRawRequest(`POST ${target} HTTP/1.1`, [['Host', 'gateway.test'], ...headers, ['Transfer-Encoding', 'chunked']], 'zz\r\nhello\r\n0\r\n\r\n'))
    expect(statuses(result), result.bytes.toString('latin1')).toEqual([status])
    expect(result.closedByServer).toBe(true)
    expect(result.timedOut).toBe(false)
    expect(forwarded).toEqual([])
  })

  it.each([
    ['native', '/v4/broken-body', [['Content-Type', 'application/octet-stream']]],
    ['legacy', EXECUTE, LEGACY_HEADERS]
  ] as const)('answers a %s request whose chunked body breaks midway as that request: its x-request-id, one access line, one count (SPEC 6)', async (_kind, target, headers) => {
    const requestId = `broken-body-${_kind}`
    const before = await requestsCounted()
    const { result } = await exchange(buildRawRequest(`POST ${target} HTTP/1.1`, [['Host', 'gateway.test'], ...headers, ['X-Request-Id', requestId], ['Transfer-Encoding', 'chunked']], '5\r\nhello\r\nzz\r\n'))
    expectOneRefusalThenClose(result)
    expect(result.response?.headers['x-request-id']).toBe(requestId)
    expect(result.response?.json?.error?.requestId).toBe(requestId)
    await until(async () => (await requestsCounted()) > before)
    expect(await requestsCounted()).toBe(before + 1)
    const lines = gw.logs.lines().filter((line) => line.msg === 'request' && line.requestId === requestId)
    expect(lines).toEqual([expect.objectContaining({ status: 400, error: 'INVALID_REQUEST' })])
  })

  it('does not answer again a malformed chunk that arrives after its request was answered on a kept-alive connection', async () => {
    const { port } = new URL(gw.url)
    const socket = connect(Number(port), '127.0.0.1')
    let text = ''
    socket.setEncoding('latin1')
    socket.on('error', () => undefined)
    const closed = new Promise<boolean>((resolve) => {
      socket.on('close', () => resolve(true))
      setTimeout(() => resolve(false), 3_000)
    })
    socket.write('POST /v3/unknown HTTP/1.1\r\nHost: gateway.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n')
    await new Promise<void>((resolve) => socket.on('data', (chunk: string) => ((text += chunk), text.includes('"ROUTE_NOT_FOUND"') && resolve())))
    // The 404 went out on a kept-alive connection before the body ended; the rest of it is malformed.
    await new Promise((resolve) => setTimeout(resolve, 50))
    socket.write('zz\r\nhello\r\n0\r\n\r\n')
    const wasClosed = await closed
    socket.destroy()
    expect([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1])), text).toEqual([404])
    expect(wasClosed).toBe(true)
  })

  it('answers a malformed request pipelined behind a good one after the good one, then closes', async () => {
    const { result, forwarded } = await exchange(Buffer.from('GET /v4/first HTTP/1.1\r\nHost: gateway.test\r\n\r\nGET /v4/second HTTP/1.1\r\nHost gateway.test\r\n\r\n', 'latin1'))
    expect(statuses(result), result.bytes.toString('latin1')).toEqual([200, 400])
    expect(result.bytes.toString('latin1')).toMatch(/^HTTP\/1\.1 200 [^]*\{"ok":true\}\r\n0\r\n\r\nHTTP\/1\.1 400 /)
    expect(result.closedByServer).toBe(true)
    expect(forwarded).toEqual(['GET /v4/first'])
  })

  it('answers the request that asked to close, and reads nothing sent after it', async () => {
    const { result, forwarded } = await exchange(Buffer.from(`GET /v4/first HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n${NEXT}`, 'latin1'))
    expect(statuses(result), result.bytes.toString('latin1')).toEqual([200])
    expect(result.response?.complete).toBe(true)
    expect(result.closedByServer).toBe(true)
    expect(forwarded).toEqual(['GET /v4/first'])
  })
})

it('forwarded nothing after an exchange had ended: every head at the upstream came within its exchange', async () => {
  await new Promise((resolve) => setTimeout(resolve, 100))
  expect(headsAtUpstream).toBeGreaterThan(10)
  expect(headsAtUpstream).toBe(headsInExchanges)
})
