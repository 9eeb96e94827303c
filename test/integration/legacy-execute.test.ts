import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { answerJson, startFaultUpstream, type FaultUpstream } from '../helpers/fault-upstream.js'
import { send } from '../helpers/http.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { startSimulator, type StartedSimulator } from '../helpers/start-simulator.js'

const AUTH = { authorization: 'Bearer demo-token-alice' }

describe('legacy POST /v1/headless/runs', () => {
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

  it('translates into POST /v4/execute with only the fields given', async () => {
    sim.simulator.resetCalls()
    const answer = await send(gw.url, '/v1/headless/runs', { headers: AUTH, json: { input: { q: 1 }, policy: 'strict' } })
    expect(answer.status).toBe(200)
    expect(answer.json.effective).toEqual({ policy: 'strict', route: 'standard', risk: 'low' })
    const calls = sim.simulator.calls
    expect(calls.map((call) => `${call.method} ${call.path}`)).toEqual(['POST /v4/execute'])
    expect(calls[0]?.body).toEqual({ input: { q: 1 }, policy: 'strict' })
  })

  it('answers with the client request id in x-request-id and meta.requestId', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...AUTH, 'x-request-id': 'client-id-1' }, json: { input: null } })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-request-id']).toBe('client-id-1')
    expect(answer.json.meta.requestId).toBe('client-id-1')
    expect(typeof answer.json.meta.timingMs.total).toBe('number')
  })
})

// The simulator fills meta itself; an upstream that does not shows the gateway's filling (SPEC 6).
describe('legacy answers from an upstream that leaves meta out', () => {
  let upstream: FaultUpstream
  let gw: StartedGateway

  beforeAll(async () => {
    upstream = await startFaultUpstream()
    gw = await startGateway(testConfig(upstream.url))
  })
  afterAll(async () => {
    await gw.close()
    await upstream.close()
  })

  it('fills meta.requestId and meta.timingMs.total where the upstream left them out', async () => {
    upstream.setHandler((exchange) => answerJson(exchange, 200, { output: 'no meta' }))
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...AUTH, 'x-request-id': 'client-id-2' }, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(answer.json).toEqual({ output: 'no meta', meta: { requestId: 'client-id-2', timingMs: { total: expect.any(Number) } } })
  })

  it('keeps the values the upstream gave and fills only the missing one', async () => {
    upstream.setHandler((exchange) => answerJson(exchange, 200, { output: 'some meta', meta: { requestId: 'upstream-id', extra: true } }))
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...AUTH, 'x-request-id': 'client-id-3' }, json: { input: 1 } })
    expect(answer.json).toEqual({ output: 'some meta', meta: { requestId: 'upstream-id', extra: true, timingMs: { total: expect.any(Number) } } })
    expect(answer.headers['x-request-id']).toBe('client-id-3')
  })
})
