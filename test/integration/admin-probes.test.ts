import type { ServerResponse } from 'node:http'
import { afterEach, describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { rawExchange } from '../helpers/raw-http.js'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'

describe('admin probes while running', () => {
  const upstream = useRecordingUpstream()
  const gw = useGateway(() => testConfig(upstream.url, { log: { level: 'silent' } }))

  it('answers GET /healthz with 200 on the admin listener', async () => {
    const answer = await send(gw.adminUrl, '/healthz')
    expect(answer.status).toBe(200)
  })

  it('answers GET /readyz with 200 on the admin listener once listening', async () => {
    const answer = await send(gw.adminUrl, '/readyz')
    expect(answer.status).toBe(200)
  })

  it('reports isReady() true once listening', () => {
    expect(gw.gateway.isReady()).toBe(true)
  })

  it('does not serve the probes on the traffic listener', async () => {
    const answer = await send(gw.url, '/healthz')
    expect(answer.status).toBe(404)
    expect(answer.json.error.code).toBe('ROUTE_NOT_FOUND')
    expect(upstream.requests).toEqual([])
  })
  // What fastify and Node refuse before a route runs gets the SPEC 6 envelope, as on the traffic listener.
  it.each([
    ['an undecodable URL', 'GET /healthz%zz HTTP/1.1\r\nHost: a\r\nX-Request-Id: bad-url-1\r\nConnection: close\r\n\r\n', 'bad-url-1'],
    ['a request that is not HTTP', 'GARBAGE\r\n\r\n', undefined],
    ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', undefined]
  ])('answers %s on the admin listener with 400 in the SPEC 6 envelope', async (_case, request, requestId) => {
    const result = await rawExchange(gw.adminUrl, request)
    expect(result.response?.status).toBe(400)
    expect(result.response?.json.error.code).toBe('INVALID_REQUEST')
    const id = result.response?.headers['x-request-id']
    expect(id).toEqual(requestId ?? expect.any(String))
    expect(result.response?.json.meta.requestId).toBe(id)
  })
})

describe('admin probes with an admin token', () => {
  const gw = useGateway(() => testConfig('http://127.0.0.1:9', { log: { level: 'silent' }, admin: { token: 'admin-secret' } }))

  it('keeps GET /healthz open without the admin token', async () => {
    expect((await send(gw.adminUrl, '/healthz')).status).toBe(200)
  })

  it('keeps GET /readyz open without the admin token', async () => {
    expect((await send(gw.adminUrl, '/readyz')).status).toBe(200)
  })
})

describe('admin probes while draining', () => {
  let held: ServerResponse | undefined
  const upstream = useRecordingUpstream((_request, response) => {
    held = response
  })
  const gw = useGateway(() => testConfig(upstream.url, { log: { level: 'silent' } }))
  afterEach(() => {
    held?.end('released')
  })

  it('answers GET /readyz with 503 and isReady() false once close() began, while a request is still in flight', async () => {
    const inFlight = send(gw.url, '/v4/slow')
    await expect.poll(() => held !== undefined, { timeout: 2_000, interval: 10 }).toBe(true)

    const closing = gw.gateway.close()
    expect(gw.gateway.isReady()).toBe(false)
    const readiness = await send(gw.adminUrl, '/readyz')
    expect(readiness.status).toBe(503)

    held?.end('released')
    const answer = await inFlight
    expect(answer.status).toBe(200)
    expect(answer.text).toBe('released')
    await closing
  })
})
