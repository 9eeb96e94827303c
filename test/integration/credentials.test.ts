import { describe, it, expect } from 'vitest'
import type { SimulatorCall } from '../../src/simulator/index.js'
import { send, type Answer } from '../helpers/http.js'
import { useSimulatorGateway } from '../helpers/simulator-gateway.js'
import { testConfig, useGateway, type StartedGateway } from '../helpers/start-gateway.js'

// SPEC 5: how legacy clients may present a credential on the runtime routes, and what reaches V4.

const TOKEN = 'demo-token-alice'
const SERVICE_KEY = 'key_demo_admin'
const SERVICE_ACCOUNT_ID = 'sa_demo'
type Headers = Record<string, string | string[]>

const CREDENTIAL_HEADERS_OTHER_THAN_AUTHORIZATION = ['x-session-token', 'x-api-key', 'x-service-api-key'] as const

const RUNTIME_ROUTES = [
  { action: 'execute', path: '/v1/headless/runs', body: { input: { q: 1 } } },
  { action: 'session-execute', path: '/v1/runs/invoke', body: { input: { q: 1 }, stateId: 'credentials-test', state: { policy: 'strict' } } }
] as const

/** The SPEC 6 envelope of an error the gateway made itself, with its status and code. */
function expectGatewayError(answer: Answer, status: number, code: string): void {
  expect(answer.status).toBe(status)
  expect(answer.json?.error?.code).toBe(code)
  expect(answer.json.error.requestId).toBe(answer.headers['x-request-id'])
}

/** Every call the simulator got carried the token as exactly `authorization: Bearer <token>` and nothing else. */
function expectOnlyBearer(calls: readonly SimulatorCall[], token: string): void {
  expect(calls.length).toBeGreaterThan(0)
  for (const call of calls) {
    expect(call.headers.authorization).toBe(`Bearer ${token}`)
    for (const name of CREDENTIAL_HEADERS_OTHER_THAN_AUTHORIZATION) expect(call.headers).not.toHaveProperty(name)
    expect(call.url).toBe(call.path)
  }
}

describe('credentials on runtime routes (SPEC 5)', () => {
  const { sim, gw } = useSimulatorGateway()
  const gwQuery = useGateway(() => testConfig(sim.url, { credentials: { queryParam: 'token' } }))

  async function call(route: (typeof RUNTIME_ROUTES)[number], headers: Headers, via: StartedGateway = gw, query = ''): Promise<Answer> {
    sim.simulator.resetCalls()
    return send(via.url, `${route.path}${query}`, { headers, json: route.body })
  }

  describe.each(RUNTIME_ROUTES)('POST $path ($action)', (route) => {
    it('answers 401 AUTH_INVALID saying a session token is missing when nothing is presented', async () => {
      const answer = await call(route, {})
      expectGatewayError(answer, 401, 'AUTH_INVALID')
      expect(answer.json.error.message).toMatch(/session token is missing/i)
      expect(sim.simulator.calls).toEqual([])
    })

    it.each<{ source: string; headers: Headers }>([
      { source: 'x-service-api-key', headers: { 'x-service-api-key': SERVICE_KEY } },
      { source: 'x-api-key', headers: { 'x-api-key': SERVICE_KEY } },
      { source: 'authorization: Bearer', headers: { authorization: `Bearer ${SERVICE_KEY}` } }
    ])('answers 401 AUTH_INVALID saying service keys are for admin/config APIs only when a key_* token comes in $source', async ({ headers }) => {
      const answer = await call(route, headers)
      expectGatewayError(answer, 401, 'AUTH_INVALID')
      expect(answer.json.error.message).toMatch(/session token is missing/i)
      expect(answer.json.error.message).toMatch(/service keys are for admin\/config APIs only/i)
      expect(sim.simulator.calls).toEqual([])
    })

    it.each<{ source: string; headers: Headers }>([
      { source: 'authorization: Bearer', headers: { authorization: `Bearer ${SERVICE_ACCOUNT_ID}` } },
      { source: 'x-service-api-key', headers: { 'x-service-api-key': SERVICE_ACCOUNT_ID } },
      { source: 'x-api-key', headers: { 'x-api-key': SERVICE_ACCOUNT_ID } }
    ])('answers 401 INVALID_CREDENTIAL_TYPE when an sa_* id comes in $source', async ({ headers }) => {
      const answer = await call(route, headers)
      expectGatewayError(answer, 401, 'INVALID_CREDENTIAL_TYPE')
      expect(sim.simulator.calls).toEqual([])
    })

    it.each<{ source: string; headers: Headers }>([
      { source: 'authorization: Bearer', headers: { authorization: `Bearer ${TOKEN}` } },
      { source: 'authorization: Token', headers: { authorization: `Token ${TOKEN}` } },
      { source: 'authorization with a lower-case scheme', headers: { authorization: `bearer ${TOKEN}` } },
      { source: 'authorization with an upper-case scheme', headers: { authorization: `BEARER ${TOKEN}` } },
      { source: 'a bare authorization value', headers: { authorization: TOKEN } },
      { source: 'x-session-token', headers: { 'x-session-token': TOKEN } },
      { source: 'x-api-key', headers: { 'x-api-key': TOKEN } },
      { source: 'x-service-api-key', headers: { 'x-service-api-key': TOKEN } }
    ])('forwards a session token from $source as exactly authorization: Bearer <token>', async ({ headers }) => {
      const answer = await call(route, headers)
      expect(answer.status).toBe(200)
      expectOnlyBearer(sim.simulator.calls, TOKEN)
    })

    it('forwards a session token from the configured query parameter as a bearer token and drops the query credential', async () => {
      const answer = await call(route, {}, gwQuery, `?token=${TOKEN}`)
      expect(answer.status).toBe(200)
      expectOnlyBearer(sim.simulator.calls, TOKEN)
      for (const recorded of sim.simulator.calls) expect(recorded.url).not.toContain(TOKEN)
    })

    it('forwards one bearer token when the same session token comes in every source', async () => {
      const headers = { authorization: `Bearer ${TOKEN}`, 'x-session-token': TOKEN, 'x-api-key': TOKEN, 'x-service-api-key': TOKEN }
      const answer = await call(route, headers, gwQuery, `?token=${TOKEN}`)
      expect(answer.status).toBe(200)
      expectOnlyBearer(sim.simulator.calls, TOKEN)
    })

    it('answers 401 AUTH_INVALID for a query token when credentials.queryParam is not configured', async () => {
      const answer = await call(route, {}, gw, `?token=${TOKEN}`)
      expectGatewayError(answer, 401, 'AUTH_INVALID')
      expect(sim.simulator.calls).toEqual([])
    })

    it.each<{ case: string; headers: Headers }>([
      { case: 'authorization and x-session-token differ', headers: { authorization: `Bearer ${TOKEN}`, 'x-session-token': 'demo-token-bob' } },
      { case: 'x-api-key and x-service-api-key differ', headers: { 'x-api-key': TOKEN, 'x-service-api-key': 'demo-token-bob' } },
      { case: 'two authorization headers differ', headers: { authorization: [`Bearer ${TOKEN}`, 'Bearer demo-token-bob'] } },
      { case: 'a session token and a key_* are both presented (before classification)', headers: { 'x-session-token': TOKEN, 'x-service-api-key': SERVICE_KEY } },
      { case: 'one value is also malformed (the conflict is reported first)', headers: { authorization: 'Basic ZGVtbzp4', 'x-api-key': TOKEN } }
    ])('answers 400 CREDENTIALS_CONFLICT when $case', async ({ headers }) => {
      const answer = await call(route, headers)
      expectGatewayError(answer, 400, 'CREDENTIALS_CONFLICT')
      expect(sim.simulator.calls).toEqual([])
    })

    it('answers 400 CREDENTIALS_CONFLICT when the query credential differs from a header credential', async () => {
      const answer = await call(route, { authorization: `Bearer ${TOKEN}` }, gwQuery, '?token=demo-token-bob')
      expectGatewayError(answer, 400, 'CREDENTIALS_CONFLICT')
      expect(sim.simulator.calls).toEqual([])
    })

    it('answers 400 CREDENTIALS_CONFLICT when the query parameter is given twice with different values', async () => {
      const answer = await call(route, {}, gwQuery, `?token=${TOKEN}&token=demo-token-bob`)
      expectGatewayError(answer, 400, 'CREDENTIALS_CONFLICT')
      expect(sim.simulator.calls).toEqual([])
    })

    it.each<{ case: string; headers: Headers }>([
      { case: 'a bearer token with whitespace inside', headers: { authorization: 'Bearer demo token' } },
      { case: 'an x-session-token with whitespace inside', headers: { 'x-session-token': 'demo token' } },
      { case: 'an x-api-key with a tab inside', headers: { 'x-api-key': 'demo\ttoken' } },
      { case: 'a token longer than 4096 bytes', headers: { authorization: `Bearer ${'a'.repeat(4097)}` } },
      { case: 'an unsupported Basic scheme', headers: { authorization: 'Basic ZGVtbzp4' } },
      { case: 'a Bearer scheme without a token', headers: { authorization: 'Bearer' } }
    ])('answers 401 AUTH_INVALID for $case', async ({ headers }) => {
      const answer = await call(route, headers)
      expectGatewayError(answer, 401, 'AUTH_INVALID')
      expect(sim.simulator.calls).toEqual([])
    })

    it('answers 401 AUTH_INVALID for a query credential with whitespace inside', async () => {
      const answer = await call(route, {}, gwQuery, '?token=demo%20token')
      expectGatewayError(answer, 401, 'AUTH_INVALID')
      expect(sim.simulator.calls).toEqual([])
    })

    it('forwards a token of exactly 4096 bytes, leaving its verdict to the backend', async () => {
      const token = 'a'.repeat(4096)
      const answer = await call(route, { authorization: `Bearer ${token}` })
      // The simulator does not know the token: its own 401, not the gateway's.
      expect(answer.status).toBe(401)
      expect(answer.json.error.requestId).toBeUndefined()
      expectOnlyBearer(sim.simulator.calls, token)
    })
  })
})
