import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { startRecordingUpstream, type RecordedRequest, type RecordingUpstream } from '../helpers/recording-upstream.js'
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

  it('fills meta.requestId and meta.timingMs.total only where the upstream left them out', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...AUTH, 'x-request-id': 'client-id-1' }, json: { input: null } })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-request-id']).toBe('client-id-1')
    expect(answer.json.meta.requestId).toBe('client-id-1')
    expect(typeof answer.json.meta.timingMs.total).toBe('number')
  })
})

describe('the POST /v4/execute body of a legacy execute call', () => {
  let upstream: RecordingUpstream
  let gw: StartedGateway

  beforeAll(async () => {
    upstream = await startRecordingUpstream()
    const tenant = (legacy: Record<string, unknown>) => ({ upstream: { staging: upstream.url }, legacy })
    gw = await startGateway(testConfig(upstream.url, { tenants: { acme: tenant({}), remap: tenant({ fields: { input: '/payload' } }), dropper: tenant({ unknownFields: 'drop' }) } }))
  })
  afterAll(async () => {
    await gw.close()
    await upstream.close()
  })

  // Spacing, an escape, a number spelt "1.50" and an unknown member: a second serialisation would change each.
  const SPELT = '{ "input" : {"text":"caf\\u00e9","n":1.50}, "policy":"strict", "trace" : [1 , 2] }'

  async function upstreamBodyFor(tenant: string, body: string): Promise<string> {
    upstream.requests.length = 0
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...AUTH, 'x-tenant-id': tenant, 'content-type': 'application/json' }, body })
    expect(answer.status).toBe(200)
    expect(upstream.requests.map((request) => `${request.method} ${request.url}`)).toEqual(['POST /v4/execute'])
    return (upstream.requests[0] as RecordedRequest).body.toString('utf8')
  }

  it('is the client body byte for byte when the translation keeps every member as it is', async () => {
    expect(await upstreamBodyFor('acme', SPELT)).toBe(SPELT)
  })

  it('is the translation, serialised, when legacy.fields or unknownFields change the members', async () => {
    expect(await upstreamBodyFor('remap', '{ "payload" : {"n":1.50}, "trace":1 }')).toBe('{"trace":1,"input":{"n":1.5}}')
    expect(await upstreamBodyFor('dropper', SPELT)).toBe('{"input":{"text":"café","n":1.5},"policy":"strict"}')
  })
})
