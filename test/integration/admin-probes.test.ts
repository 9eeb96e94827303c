import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'

describe('admin probes while running', () => {
  let upstream: RecordingUpstream
  let gw: StartedGateway

  beforeAll(async () => {
    upstream = await startRecordingUpstream()
    gw = await startGateway(testConfig(upstream.url, { log: { level: 'silent' } }))
  })
  afterAll(async () => {
    await gw.close()
    await upstream.close()
  })

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
})

describe('admin probes with an admin token', () => {
  let gw: StartedGateway

  beforeAll(async () => {
    gw = await startGateway(testConfig('http://127.0.0.1:9', { log: { level: 'silent' }, admin: { token: 'admin-secret' } }))
  })
  afterAll(async () => {
    await gw.close()
  })

  it('keeps GET /healthz open without the admin token', async () => {
    expect((await send(gw.adminUrl, '/healthz')).status).toBe(200)
  })

  it('keeps GET /readyz open without the admin token', async () => {
    expect((await send(gw.adminUrl, '/readyz')).status).toBe(200)
  })
})

describe('admin probes while draining', () => {
  let upstream: Server
  let held: ServerResponse | undefined
  let gw: StartedGateway
  let closing: Promise<void> | undefined

  beforeAll(async () => {
    upstream = createServer((_request, response) => {
      held = response
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
    gw = await startGateway(testConfig(upstreamUrl, { log: { level: 'silent' } }))
  })
  afterEach(() => {
    held?.end('released')
  })
  afterAll(async () => {
    held?.end('released')
    await (closing ?? gw.close())
    upstream.closeAllConnections()
    await new Promise<void>((resolve) => upstream.close(() => resolve()))
  })

  it('answers GET /readyz with 503 and isReady() false once close() began, while a request is still in flight', async () => {
    const inFlight = send(gw.url, '/v4/slow')
    await expect.poll(() => held !== undefined, { timeout: 2_000, interval: 10 }).toBe(true)

    closing = gw.gateway.close()
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
