import { describe, expect, it } from 'vitest'
import { answerJson, useFaultUpstream } from '../helpers/fault-upstream.js'
import { send } from '../helpers/http.js'
import { useSimulatorGateway } from '../helpers/simulator-gateway.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'

const AUTH = { authorization: 'Bearer demo-token-alice' }

describe('legacy POST /v1/headless/runs', () => {
  const { sim, gw } = useSimulatorGateway()

  it('translates into POST /v4/execute with only the fields given', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: AUTH, json: { input: { q: 1 }, policy: 'strict' } })
    expect(answer.status).toBe(200)
    expect(answer.json.effective).toEqual({ policy: 'strict', route: 'standard', risk: 'low' })
    const calls = sim.simulator.calls
    expect(calls.map((call) => `${call.method} ${call.path}`)).toEqual(['POST /v4/execute'])
    expect(calls[0]?.body).toEqual({ input: { q: 1 }, policy: 'strict' })
  })

  it.each([
    ['/v1/headless/runs', {}],
    ['/v1/runs/invoke', { stateId: 'deep' }]
  ])('answers 400 INVALID_REQUEST on POST %s to an input nested too deeply to pass on, calling nothing upstream', async (path, extra) => {
    const depth = 100_000
    const text = JSON.stringify({ ...extra, input: 'x' }).replace('"x"', `${'['.repeat(depth)}${']'.repeat(depth)}`)
    const answer = await send(gw.url, path, { headers: { ...AUTH, 'content-type': 'application/json' }, body: text })
    expect(answer.status).toBe(400)
    expect(answer.json.error).toMatchObject({ code: 'INVALID_REQUEST', message: 'request body is nested too deeply to pass on' })
    expect(sim.simulator.calls).toEqual([])
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
  const upstream = useFaultUpstream()
  const gw = useGateway(() => testConfig(upstream.url))

  it('sends an answer nested too deeply to fill in as it came, status 200, rather than a 500', async () => {
    const text = `{"output":${'['.repeat(100_000)}${']'.repeat(100_000)}}`
    upstream.setHandler((exchange) => exchange.response.writeHead(200, { 'content-type': 'application/json' }).end(text))
    const answer = await send(gw.url, '/v1/headless/runs', { headers: AUTH, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(answer.text).toBe(text)
  })

  it('fills meta.timingMs.total with the request\'s measured total, in milliseconds', async () => {
    // The upstream takes 300 ms: the total is about that, in ms (a value in seconds, or 0, is not;
    // a timer may fire up to a millisecond early on the loop's whole-millisecond clock).
    upstream.setHandler((exchange) => void setTimeout(() => answerJson(exchange, 200, { output: 'slow' }), 300))
    const answer = await send(gw.url, '/v1/headless/runs', { headers: AUTH, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(answer.json.meta.timingMs.total).toBeGreaterThanOrEqual(290)
    expect(answer.json.meta.timingMs.total).toBeLessThan(60_000)
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
