import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { startSimulator, type StartedSimulator } from '../helpers/start-simulator.js'

describe('a draining gateway', () => {
  let sim: StartedSimulator
  let gw: StartedGateway

  beforeAll(async () => {
    sim = await startSimulator()
    gw = await startGateway(testConfig(sim.url))
  })
  afterAll(async () => {
    await gw.close()
    await sim.close()
  })

  it('answers 503 SHUTTING_DOWN with connection: close to requests that still arrive, and reports not ready', async () => {
    gw.gateway.startDraining()
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: 1 } })
    expect(answer.status).toBe(503)
    expect(answer.json.error.code).toBe('SHUTTING_DOWN')
    expect(answer.headers.connection).toBe('close')
    expect(answer.headers['x-request-id']).toBe(answer.json.error.requestId)
    expect((await send(gw.adminUrl, '/readyz')).status).toBe(503)
    expect(sim.simulator.calls).toEqual([])
  })
})
