import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { rawExchange } from '../helpers/raw-http.js'
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'

/**
 * What the traffic listener keeps by hand now that it is node:http rather than a fastify route
 * (docs/decisions.md): its server settings, and which requests carry a body upstream.
 */
let upstream: RecordingUpstream
let gw: StartedGateway

beforeAll(async () => {
  upstream = await startRecordingUpstream()
  gw = await startGateway(testConfig(upstream.url))
})

afterAll(async () => {
  await gw?.close()
  await upstream?.close()
})

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

  it('stops listening on close and then refuses new connections', async () => {
    const upstreamForClose = await startRecordingUpstream()
    const own = await startGateway(testConfig(upstreamForClose.url))
    await own.close()
    expect(own.gateway.trafficServer.listening).toBe(false)
    const refused = await rawExchange(own.url, 'GET /v4/x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n', { timeoutMs: 1_000 })
    expect(refused.errorCode).toBe('ECONNREFUSED')
    await upstreamForClose.close()
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

  it('never reads a GET body: the upstream gets none', async () => {
    const answer = await exchange('GET /v4/things HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 4\r\nConnection: close\r\n\r\n', 'abcd')
    expect(answer.status).toBe(200)
    expect(lastRequest().method).toBe('GET')
    expect(lastRequest().body.length).toBe(0)
  })
})
