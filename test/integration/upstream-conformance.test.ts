import { Agent, request as undiciRequest } from 'undici'
import { beforeEach, describe, expect, it } from 'vitest'
import { ERROR_STATUS, type ErrorCode } from '../../src/errors/registry.js'
import { useFaultUpstream, type FaultExchange, type FaultHandler } from '../helpers/fault-upstream.js'
import { send, type Answer } from '../helpers/http.js'
import { parseRawResponse, rawExchange, type RawResponse } from '../helpers/raw-http.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'
import { until } from '../helpers/until.js'

/*
 * What a careful upstream may send and a gateway must still get right (RFC 9110, RFC 9112),
 * written as raw bytes by a fault upstream. Native calls are streamed (passthrough/), legacy
 * calls read whole (legacy/): both go through upstream/upstream-client.ts.
 */

const TOKEN = 'Bearer conformance-token'
const FINAL_JSON = '{"output":"final","meta":{}}'
const FINAL_200 = `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${FINAL_JSON.length}\r\n\r\n${FINAL_JSON}`
const AFTER = 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nafter'

/** Writes `bytes` on the upstream's socket as they are and keeps the connection, as a keep-alive server would. */
function writeRaw(bytes: string): FaultHandler {
  return (exchange) => void exchange.socket.write(bytes)
}

/** Writes the pieces one after another, `gapMs` apart, so that each reaches the gateway on its own. */
function writeInPieces(pieces: readonly string[], gapMs = 30): FaultHandler {
  return (exchange) => {
    let index = 0
    const next = (): void => {
      const piece = pieces[index++]
      if (piece === undefined || exchange.socket.destroyed) return
      exchange.socket.write(piece)
      setTimeout(next, gapMs)
    }
    next()
  }
}

function legacyCall(gatewayUrl: string): Promise<Answer> {
  return send(gatewayUrl, '/v1/headless/runs', { headers: { authorization: TOKEN }, json: { input: { n: 1 } } })
}

/** SPEC 6 envelope: the status of the code, JSON, the request id in header and body. */
function expectGatewayError(answer: Answer, code: ErrorCode): void {
  expect({ status: answer.status, code: answer.json?.error?.code }).toEqual({ status: ERROR_STATUS[code], code })
  expect(answer.headers['content-type']).toMatch(/^application\/json/)
  expect(answer.json.error.requestId).toBe(answer.headers['x-request-id'])
}

/** Every answer in `bytes`, in order, each cut where its framing ends (`methods[i]` asked for the i-th). */
function answersIn(bytes: Buffer, methods: readonly string[], ended: boolean): RawResponse[] {
  const found: RawResponse[] = []
  let rest = bytes
  for (const method of methods) {
    const answer = parseRawResponse(rest, ended, method)
    if (answer === undefined) break
    found.push(answer)
    const headEnd = rest.indexOf('\r\n\r\n') + 4
    const bodyless = method === 'HEAD' || answer.status === 204 || answer.status === 304
    rest = rest.subarray(headEnd + (bodyless ? 0 : (answer.declaredLength ?? rest.length)))
  }
  if (rest.length > 0 && found.length === methods.length) throw new Error(`bytes after the last answer: ${rest.toString('latin1')}`)
  return found
}

/** One gateway (tenant `acme`, logging at info) on one fault upstream whose behaviour each test sets. */
function useConformanceGateway(): { upstream: ReturnType<typeof useFaultUpstream>; gateway: ReturnType<typeof useGateway> } {
  const upstream = useFaultUpstream(writeRaw(FINAL_200))
  const gateway = useGateway(() => testConfig(upstream.url, { log: { level: 'info' }, limits: { upstreamTimeoutMs: 2_000 } }))
  beforeEach(() => {
    upstream.setHandler(writeRaw(FINAL_200))
    upstream.exchanges.length = 0
  })
  return { upstream, gateway }
}

/** The access line of the request with this id, once it is written. */
async function accessLine(gateway: ReturnType<typeof useGateway>, requestId: string): Promise<Record<string, unknown>> {
  const find = (): Record<string, unknown> | undefined => gateway.logs.lines().find((line) => line.msg === 'request' && line.requestId === requestId)
  await until(() => find() !== undefined)
  return find() as Record<string, unknown>
}

describe('answers that end at their headers (RFC 9112 6.3): 204, 304, and any answer to HEAD', () => {
  const { upstream, gateway } = useConformanceGateway()

  /** By path: the bodyless answer under test, and a plain one for the request pipelined behind it. */
  function answerByPath(bodyless: Record<string, string>): FaultHandler {
    return (exchange: FaultExchange) => void exchange.socket.write(bodyless[exchange.url] ?? AFTER)
  }

  /** Two requests in one write on one connection: `first`, then a GET that closes the connection. */
  async function pipelined(method: string, path: string, extra = ''): Promise<{ answers: RawResponse[]; closedByServer: boolean; timedOut: boolean; raw: string }> {
    const request =
      `${method} ${path} HTTP/1.1\r\nHost: gateway.test\r\nX-Request-Id: first-${method}-${path.slice(4)}\r\n${extra}\r\n` +
      'GET /v4/after HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n'
    const result = await rawExchange(gateway.url, request, { timeoutMs: 3_000 })
    return { answers: answersIn(result.bytes, [method, 'GET'], result.closedByServer), closedByServer: result.closedByServer, timedOut: result.timedOut, raw: result.bytes.toString('latin1') }
  }

  function expectAfterAnswered(result: Awaited<ReturnType<typeof pipelined>>): void {
    expect(result.answers, result.raw).toHaveLength(2)
    expect(result.answers[1]).toMatchObject({ status: 200, text: 'after', complete: true })
    expect(result.timedOut).toBe(false)
  }

  it('passes a 304 with its ETag and Content-Length on, with no body, and answers the request pipelined behind it', async () => {
    upstream.setHandler(answerByPath({ '/v4/cached': 'HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nCache-Control: max-age=60\r\nContent-Length: 1234\r\n\r\n' }))
    const result = await pipelined('GET', '/v4/cached', 'If-None-Match: "v1"\r\n')
    expectAfterAnswered(result)
    // RFC 9110 8.6: a 304's Content-Length is the length the 200 would have had; it is passed on.
    expect(result.answers[0]).toMatchObject({ status: 304, headers: { etag: '"v1"', 'cache-control': 'max-age=60', 'content-length': '1234' } })
    expect(result.raw.split('HTTP/1.1 ')).toHaveLength(3)
    expect(await accessLine(gateway, 'first-GET-cached')).toMatchObject({ status: 304 })
    expect((await accessLine(gateway, 'first-GET-cached')).error).toBeUndefined()
  })

  it('passes a 204 that wrongly carries a Content-Length on without it, and answers the request pipelined behind it', async () => {
    upstream.setHandler(answerByPath({ '/v4/deleted': 'HTTP/1.1 204 No Content\r\nX-Deleted: yes\r\nContent-Length: 57\r\n\r\n' }))
    const result = await pipelined('DELETE', '/v4/deleted')
    expectAfterAnswered(result)
    expect(result.answers[0]).toMatchObject({ status: 204, headers: { 'x-deleted': 'yes' } })
    // RFC 9110 8.6: a sender must not send Content-Length in a 204.
    expect(result.answers[0]?.headers['content-length']).toBeUndefined()
    expect(result.raw.split('HTTP/1.1 ')).toHaveLength(3)
    expect((await accessLine(gateway, 'first-DELETE-deleted')).error).toBeUndefined()
  })

  it('answers a legacy call with a 204 that wrongly carries a Content-Length, not with a 502', async () => {
    upstream.setHandler(writeRaw('HTTP/1.1 204 No Content\r\nContent-Length: 57\r\n\r\n'))
    const answer = await legacyCall(gateway.url)
    expect(answer.status, answer.text).toBe(204)
    expect(answer.text).toBe('')
  })

  it('passes the answer to a HEAD on with its Content-Length and no body, and answers the request pipelined behind it', async () => {
    upstream.setHandler(answerByPath({ '/v4/files/report': 'HTTP/1.1 200 OK\r\nContent-Type: application/pdf\r\nContent-Length: 1234\r\n\r\n' }))
    const result = await pipelined('HEAD', '/v4/files/report')
    expectAfterAnswered(result)
    expect(result.answers[0]).toMatchObject({ status: 200, headers: { 'content-type': 'application/pdf', 'content-length': '1234' } })
    expect(result.raw.split('HTTP/1.1 ')).toHaveLength(3)
  })

  it('passes a 304 on whose upstream says Transfer-Encoding: chunked, and sends no chunk', async () => {
    upstream.setHandler(answerByPath({ '/v4/cached': 'HTTP/1.1 304 Not Modified\r\nETag: "v2"\r\nTransfer-Encoding: chunked\r\n\r\n' }))
    const result = await pipelined('GET', '/v4/cached')
    expectAfterAnswered(result)
    expect(result.answers[0]).toMatchObject({ status: 304, headers: { etag: '"v2"' } })
  })
})

describe('an interim 100 (Continue) nobody asked for (RFC 9110 15.2)', () => {
  const { upstream, gateway } = useConformanceGateway()
  const CONTINUE = 'HTTP/1.1 100 Continue\r\n\r\n'
  const HINT = 'HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n'

  it.each([
    ['in the same write as the final answer', writeRaw(CONTINUE + FINAL_200)],
    ['in a write of its own', writeInPieces([CONTINUE, FINAL_200])],
    ['split in the middle of its status line', writeInPieces(['HTTP/1.1 10', '0 Continue\r\nX-Interim: yes\r\n\r\n', FINAL_200])],
    ['twice, then the final answer', writeInPieces([CONTINUE + CONTINUE, FINAL_200])]
  ])('passes the final answer on to a native call when the 100 comes %s', async (_case, handler) => {
    upstream.setHandler(handler)
    const result = await rawExchange(gateway.url, 'GET /v4/policies HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n', { timeoutMs: 3_000 })
    // The client asked for no 100 either: the first thing it reads is the final answer.
    expect(result.response, result.bytes.toString('latin1')).toMatchObject({ status: 200, text: FINAL_JSON, complete: true })
  })

  it('passes the final answer on to a native upload that the upstream answers 100 without being asked', async () => {
    upstream.setHandler(writeRaw(CONTINUE + FINAL_200))
    const body = '{"input":{"n":1}}'
    const result = await rawExchange(
      gateway.url,
      `POST /v4/execute HTTP/1.1\r\nHost: gateway.test\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      { timeoutMs: 3_000 }
    )
    expect(result.response, result.bytes.toString('latin1')).toMatchObject({ status: 200, text: FINAL_JSON, complete: true })
    expect(upstream.exchanges[0]?.body.toString()).toBe(body)
  })

  it('answers a legacy call with the final answer', async () => {
    upstream.setHandler(writeInPieces([CONTINUE, FINAL_200]))
    const answer = await legacyCall(gateway.url)
    expect(answer.status, answer.text).toBe(200)
    expect(answer.json.output).toBe('final')
  })

  it('passes the final answer on to a chunked native upload', async () => {
    upstream.setHandler(writeInPieces([CONTINUE, FINAL_200]))
    const result = await rawExchange(
      gateway.url,
      'POST /v4/execute HTTP/1.1\r\nHost: gateway.test\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n6\r\n{"a":1\r\n1\r\n}\r\n0\r\n\r\n',
      { timeoutMs: 3_000 }
    )
    expect(result.response, result.bytes.toString('latin1')).toMatchObject({ status: 200, text: FINAL_JSON, complete: true })
    expect(upstream.exchanges[0]?.body.toString()).toBe('{"a":1}')
  })

  it('still passes a 103 Early Hints on, and the final answer after it', async () => {
    upstream.setHandler(writeInPieces([HINT, FINAL_200]))
    const result = await rawExchange(gateway.url, 'GET /v4/policies HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n', { timeoutMs: 3_000 })
    const text = result.bytes.toString('latin1')
    expect(text.startsWith('HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n'), text).toBe(true)
    expect(parseRawResponse(result.bytes.subarray(text.indexOf('\r\n\r\n') + 4), result.closedByServer)).toMatchObject({ status: 200, text: FINAL_JSON })
  })

  it.each([
    ['in one write', writeRaw(`${HINT}${CONTINUE}${FINAL_200}`)],
    ['each in a write of its own', writeInPieces([HINT, CONTINUE, FINAL_200])]
  ])('passes a 103 Early Hints on and skips a 100 after it, %s', async (_case, handler) => {
    upstream.setHandler(handler)
    const result = await rawExchange(gateway.url, 'GET /v4/policies HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n', { timeoutMs: 3_000 })
    const text = result.bytes.toString('latin1')
    expect(text.startsWith('HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n'), text).toBe(true)
    expect(parseRawResponse(result.bytes.subarray(text.indexOf('\r\n\r\n') + 4), result.closedByServer)).toMatchObject({ status: 200, text: FINAL_JSON, complete: true })
  })

  // The connector in src/upstream/skip-unasked-continue.ts stands in for this: when undici reads past such a 100 itself, it can go.
  it('is still refused by undici on its own, which closes the connection ("bad response")', async () => {
    upstream.setHandler(writeRaw(CONTINUE + FINAL_200))
    const agent = new Agent()
    try {
      await expect(undiciRequest(`${upstream.url}/v4/policies`, { dispatcher: agent })).rejects.toMatchObject({ code: 'UND_ERR_SOCKET', message: 'bad response' })
    } finally {
      await agent.close()
    }
  })

  it('keeps the upstream connection for the next call', async () => {
    upstream.setHandler(writeRaw(CONTINUE + FINAL_200))
    expect((await send(gateway.url, '/v4/policies')).status).toBe(200)
    expect((await send(gateway.url, '/v4/policies')).status).toBe(200)
    expect(upstream.exchanges).toHaveLength(2)
    expect(upstream.exchanges[1]?.socket).toBe(upstream.exchanges[0]?.socket)
  })
})

describe('an invalid upstream status (RFC 9110 15: valid codes are 100 to 599)', () => {
  const { upstream, gateway } = useConformanceGateway()

  it.each([888, 600, 999])('answers a native call 502 UPSTREAM_BAD_RESPONSE when the upstream answers %i', async (status) => {
    upstream.setHandler(writeRaw(`HTTP/1.1 ${status} Whatever\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nno`))
    expectGatewayError(await send(gateway.url, '/v4/policies'), 'UPSTREAM_BAD_RESPONSE')
  })

  it('answers a legacy call 502 UPSTREAM_BAD_RESPONSE when the upstream answers 888', async () => {
    upstream.setHandler(writeRaw(`HTTP/1.1 888 Whatever\r\nContent-Type: application/json\r\nContent-Length: ${FINAL_JSON.length}\r\n\r\n${FINAL_JSON}`))
    expectGatewayError(await legacyCall(gateway.url), 'UPSTREAM_BAD_RESPONSE')
  })

  it('still passes the highest valid status, 599, on', async () => {
    upstream.setHandler(writeRaw('HTTP/1.1 599 Network Connect Timeout\r\nContent-Length: 2\r\n\r\nno'))
    const answer = await send(gateway.url, '/v4/policies')
    expect(answer.status).toBe(599)
    expect(answer.text).toBe('no')
  })
})

describe('an upstream transfer coding the gateway cannot decode (RFC 9112 6.1)', () => {
  const { upstream, gateway } = useConformanceGateway()
  const CODED = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: foo\r\nConnection: close\r\n\r\n\u0001\u0002coded'

  function endRaw(bytes: string): FaultHandler {
    return (exchange) => void exchange.socket.end(bytes)
  }

  it.each([
    ['foo', CODED],
    ['gzip, chunked', 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\n\u001f\u008b\b\u0000\u0000\r\n0\r\n\r\n']
  ])('answers a native call 502 UPSTREAM_BAD_RESPONSE for Transfer-Encoding: %s', async (_coding, bytes) => {
    upstream.setHandler(endRaw(bytes))
    const result = await rawExchange(gateway.url, 'GET /v4/policies HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n', { timeoutMs: 3_000 })
    expect(result.response?.status, result.bytes.toString('latin1')).toBe(502)
    expect(result.response?.json?.error?.code).toBe('UPSTREAM_BAD_RESPONSE')
    expect(result.bytes.toString('latin1')).not.toContain('coded')
  })

  it('answers a legacy call 502 UPSTREAM_BAD_RESPONSE for Transfer-Encoding: foo', async () => {
    upstream.setHandler(endRaw(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: foo\r\nConnection: close\r\n\r\n${FINAL_JSON}`))
    expectGatewayError(await legacyCall(gateway.url), 'UPSTREAM_BAD_RESPONSE')
  })

  it('passes the answer to a HEAD on whatever its Transfer-Encoding says: it has no body to decode', async () => {
    upstream.setHandler(writeRaw('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: foo\r\n\r\n'))
    const result = await rawExchange(gateway.url, 'HEAD /v4/policies HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n', { timeoutMs: 3_000 })
    expect(result.response, result.bytes.toString('latin1')).toMatchObject({ status: 200, headers: { 'content-type': 'application/json' } })
    expect(result.response?.headers['transfer-encoding']).toBeUndefined()
  })

  it('still passes a chunked answer on, whatever the case of its coding', async () => {
    upstream.setHandler(endRaw('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n'))
    const answer = await send(gateway.url, '/v4/policies')
    expect(answer.status).toBe(200)
    expect(answer.text).toBe('hello')
  })
})
