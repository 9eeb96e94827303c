import { connect } from 'node:net'
import { beforeEach, describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { expectGatewayError } from '../helpers/gateway-error.js'
import { startRecordingUpstream, useRecordingUpstream } from '../helpers/recording-upstream.js'
import { useSimulatorGateway } from '../helpers/simulator-gateway.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { startSimulator } from '../helpers/start-simulator.js'
import { until, within } from '../helpers/until.js'

describe('a draining gateway', () => {
  const { sim, gw } = useSimulatorGateway()

  it('answers 503 SHUTTING_DOWN with connection: close to requests that still arrive, and reports not ready', async () => {
    gw.gateway.startDraining()
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: 1 } })
    expectGatewayError(answer, 503, 'SHUTTING_DOWN')
    expect(answer.headers.connection).toBe('close')
    expect(answer.headers['x-request-id']).toBe(answer.json.error.requestId)
    expect((await send(gw.adminUrl, '/readyz')).status).toBe(503)
    expect(sim.simulator.calls).toEqual([])
  })
})

describe('a request in flight when draining starts', () => {
  const release: (() => void)[] = []
  // Holds each request until the test lets it go, then breaks off without an answer.
  const failing = useRecordingUpstream((_request, response) =>
    new Promise<void>((resolve) => release.push(resolve)).then(() => {
      response.socket?.destroy()
    })
  )
  let gw: StartedGateway
  // Draining does not end: a fresh gateway per case.
  beforeEach(async () => {
    gw = await startGateway(testConfig(failing.url))
  })

  it.each([
    ['a legacy call', '/v1/headless/runs', 'UPSTREAM_UNAVAILABLE'],
    ['a native call', '/v4/execute', 'UPSTREAM_UNAVAILABLE']
  ])('%s that fails after draining started is answered with connection: close, like every answer then', async (_name, path, code) => {
    const before = failing.requests.length
    const answer = send(gw.url, path, { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: 1 } })
    await until(() => failing.requests.length > before)
    gw.gateway.startDraining()
    release.shift()?.()
    const failed = await answer
    expect(failed.status).toBe(502)
    expect(failed.json.error.code).toBe(code)
    expect(failed.headers.connection).toBe('close')
  })
})

describe('a gateway whose grace period was cut', () => {
  // The cut is the gateway's, not an upstream failure: every request it ends reads as one whose
  // answer never went (499), whichever closes first, its client's connection or its upstream call.
  it('logs every request cut under way as 499 with no error, and counts no upstream failure', async () => {
    const upstream = await startRecordingUpstream(() => undefined)
    const gw = await startGateway(testConfig(upstream.url, { log: { level: 'info' } }))
    const ids = ['cut-native-1', 'cut-native-2', 'cut-native-3', 'cut-legacy-1', 'cut-legacy-2']
    const cut = ids.map((id) => send(gw.url, id.includes('native') ? '/v4/execute' : '/v1/headless/runs', { headers: { authorization: 'Bearer demo-token-alice', 'x-request-id': id }, json: { input: 1 } }).catch(() => undefined))
    await until(() => upstream.requests.length === ids.length)
    gw.gateway.startDraining()
    gw.gateway.cutRemaining()
    await Promise.all(cut)
    const lines = () => gw.logs.lines().filter((line) => line.msg === 'request' && ids.includes(String(line.requestId)))
    await until(() => lines().length === ids.length)
    expect(lines().map((line) => [line.requestId, line.status, line.error]).sort()).toEqual(ids.map((id) => [id, 499, undefined]).sort())
    expect(await gw.gateway.metrics.registry.metrics()).not.toMatch(/^v4gw_upstream_failures_total\{/m)
    await gw.close()
  })

  it('cuts an admin connection that opens between the cut and the admin listener\'s close, so it cannot hold the exit', async () => {
    const sim = await startSimulator()
    const gw = await startGateway(testConfig(sim.url))
    gw.gateway.startDraining()
    gw.gateway.cutRemaining()
    const admin = new URL(gw.adminUrl)
    const socket = connect(Number(admin.port), admin.hostname)
    socket.on('error', () => undefined)
    socket.resume()
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    await new Promise<void>((resolve) => socket.once('connect', resolve))
    socket.write('POST /admin/explain HTTP/1.1\r\nhost: admin\r\ncontent-length: 100\r\n\r\n{"pa')
    await within(closed, 1_000, 'the admin connection stayed open after the cut')
    await within(gw.close(), 2_000, 'the gateway did not close')
  })
})
