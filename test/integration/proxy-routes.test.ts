import { createHash } from 'node:crypto'
import { describe, it, expect } from 'vitest'
import { DEFAULT_SIMULATOR_OPTIONS } from '../../src/simulator/index.js'
import { send, type Answer } from '../helpers/http.js'
import { useRecordingUpstream, type RecordedRequest } from '../helpers/recording-upstream.js'
import { startGateway, testConfig, useGateway } from '../helpers/start-gateway.js'
import { refusingOrigin } from '../helpers/fault-upstream.js'
import { expectGatewayError as sharedExpectGatewayError } from '../helpers/gateway-error.js'
import { useSimulator } from '../helpers/start-simulator.js'

// SPEC 4 `proxy` action and SPEC 5 credentials on proxy (admin/config) routes.

const ADMIN_KEY = 'key_demo_admin'
const REVOCABLE_KEY = 'key_revocable_admin'
const ALICE = 'demo-token-alice'
const BOB = 'demo-token-bob'
type Headers = Record<string, string | string[]>

const CREDENTIAL_HEADERS = ['authorization', 'x-session-token', 'x-api-key', 'x-service-api-key'] as const

const PROXY_ROUTES = [
  { method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' },
  { method: 'POST', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' },
  { method: 'GET', path: '/v1/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id' },
  { method: 'GET', path: '/v1/teams/:team/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id/teams/:team' },
  // A parameter that is a whole segment of the rewrite: the client picks where it lands.
  { method: 'GET', path: '/v1/areas/:area/:item', action: 'proxy', rewrite: '/v4/:area/:item' }
]

function proxyConfig(upstreamUrl: string): Record<string, unknown> {
  return testConfig(upstreamUrl, {
    credentials: { queryParam: 'token' },
    internalAdmin: { pathPrefixes: ['/v4/internal'] },
    tenants: { acme: { upstream: { staging: upstreamUrl }, legacy: { routes: PROXY_ROUTES } } }
  })
}

/** The credential headers that reached the upstream, and nothing else. */
function credentialHeadersOf(request: { headers: Record<string, string | string[] | undefined> }): Record<string, unknown> {
  return Object.fromEntries(CREDENTIAL_HEADERS.filter((name) => request.headers[name] !== undefined).map((name) => [name, request.headers[name]]))
}

function only(requests: RecordedRequest[]): RecordedRequest {
  expect(requests).toHaveLength(1)
  return requests[0] as RecordedRequest
}

function expectGatewayError(answer: Answer, status: number, code: string): void {
  expect(answer.status).toBe(status)
  expect(answer.json?.error?.code).toBe(code)
  expect(answer.json.error.requestId).toBe(answer.headers['x-request-id'])
}

describe('a proxy route whose rewritten path is blocked, on a route retired or browned out (SPEC 14 order)', () => {
  const upstream = useRecordingUpstream()
  const deprecation = { date: '2026-01-01T00:00:00Z', brownouts: { minNoticeMs: 0, windows: [{ start: '2026-01-01T00:00:00Z', end: '2099-01-01T00:00:00Z' }] } }
  const gw = useGateway(() =>
    testConfig(upstream.url, {
      internalAdmin: { pathPrefixes: ['/v4/internal'] },
      tenancy: { default: 'retired' },
      tenants: {
        retired: { upstream: { staging: upstream.url }, legacy: { routes: PROXY_ROUTES, deprecation: { date: '2026-01-01T00:00:00Z' } }, migration: { stage: 'native-only' } },
        dimmed: { upstream: { staging: upstream.url }, legacy: { routes: PROXY_ROUTES, deprecation } }
      }
    })
  )

  it('answers the 410 every other path of the route gets, not the 403 of the translation it never reaches', async () => {
    const gone = await send(gw.url, '/v1/areas/internal/keys', { headers: { 'x-api-key': 'key_live_a' } })
    expectGatewayError(gone, 410, 'LEGACY_GONE')
    const brownout = await send(gw.url, '/v1/areas/internal/keys', { headers: { 'x-api-key': 'key_live_a', 'x-tenant-id': 'dimmed' } })
    expectGatewayError(brownout, 410, 'LEGACY_BROWNOUT')
    expect(upstream.requests).toHaveLength(0)
  })
})

describe('proxy routes towards a recording upstream', () => {
  const upstream = useRecordingUpstream()
  const gw = useGateway(() => proxyConfig(upstream.url))

  async function call(path: string, options: Parameters<typeof send>[2] = {}): Promise<Answer> {
    upstream.requests.length = 0
    return send(gw.url, path, options)
  }

  it.each<{ source: string; headers: Headers }>([
    { source: 'x-api-key', headers: { 'x-api-key': ADMIN_KEY } },
    { source: 'authorization: Bearer', headers: { authorization: `Bearer ${ADMIN_KEY}` } },
    { source: 'a bare authorization value', headers: { authorization: ADMIN_KEY } },
    { source: 'x-session-token', headers: { 'x-session-token': ADMIN_KEY } },
    { source: 'x-service-api-key', headers: { 'x-service-api-key': ADMIN_KEY } }
  ])('forwards a key_* from $source as exactly x-service-api-key', async ({ headers }) => {
    const answer = await call('/v1/policies', { headers })
    expect(answer.status).toBe(200)
    const forwarded = only(upstream.requests)
    expect(forwarded.url).toBe('/v4/policies')
    expect(credentialHeadersOf(forwarded)).toEqual({ 'x-service-api-key': ADMIN_KEY })
  })

  it('forwards a key_* from the query parameter as x-service-api-key and removes the parameter, keeping the rest of the query', async () => {
    const answer = await call(`/v1/policies?limit=5&token=${ADMIN_KEY}&sort=name`)
    expect(answer.status).toBe(200)
    const forwarded = only(upstream.requests)
    expect(forwarded.url).toBe('/v4/policies?limit=5&sort=name')
    expect(credentialHeadersOf(forwarded)).toEqual({ 'x-service-api-key': ADMIN_KEY })
  })

  it.each<{ source: string; headers: Headers }>([
    { source: 'x-session-token', headers: { 'x-session-token': ALICE } },
    { source: 'x-api-key', headers: { 'x-api-key': ALICE } },
    { source: 'authorization: Token', headers: { authorization: `Token ${ALICE}` } },
    { source: 'authorization: Bearer', headers: { authorization: `Bearer ${ALICE}` } }
  ])('forwards a session token from $source as exactly authorization: Bearer', async ({ headers }) => {
    const answer = await call('/v1/policies', { headers })
    expect(answer.status).toBe(200)
    expect(credentialHeadersOf(only(upstream.requests))).toEqual({ authorization: `Bearer ${ALICE}` })
  })

  it('removes a query credential whose parameter name is percent-encoded', async () => {
    const answer = await call(`/v1/policies?tok%65n=${ADMIN_KEY}&limit=5`)
    expect(answer.status).toBe(200)
    const forwarded = only(upstream.requests)
    expect(forwarded.url).toBe('/v4/policies?limit=5')
    expect(credentialHeadersOf(forwarded)).toEqual({ 'x-service-api-key': ADMIN_KEY })
  })

  it('forwards a session token from the query parameter as authorization: Bearer and removes the parameter', async () => {
    const answer = await call(`/v1/policies?token=${ALICE}`)
    expect(answer.status).toBe(200)
    const forwarded = only(upstream.requests)
    expect(forwarded.url).toBe('/v4/policies')
    expect(credentialHeadersOf(forwarded)).toEqual({ authorization: `Bearer ${ALICE}` })
  })

  it('forwards exactly one credential when the same key_* comes in several sources', async () => {
    const answer = await call(`/v1/policies?token=${ADMIN_KEY}`, { headers: { authorization: `Bearer ${ADMIN_KEY}`, 'x-api-key': ADMIN_KEY } })
    expect(answer.status).toBe(200)
    expect(credentialHeadersOf(only(upstream.requests))).toEqual({ 'x-service-api-key': ADMIN_KEY })
  })

  it('forwards neither a credential header spelled with underscores nor Proxy-Authorization beside the one credential', async () => {
    const headers = { authorization: `Bearer ${ALICE}`, x_service_api_key: ADMIN_KEY, x_api_key: REVOCABLE_KEY, 'proxy-authorization': `Bearer ${ADMIN_KEY}` }
    const answer = await call('/v1/policies', { headers })
    expect(answer.status).toBe(200)
    const forwarded = only(upstream.requests)
    expect(credentialHeadersOf(forwarded)).toEqual({ authorization: `Bearer ${ALICE}` })
    expect(Object.keys(forwarded.headers).filter((name) => /api.key|proxy-authorization/.test(name))).toEqual([])
  })

  it.each<{ source: string; headers: Headers }>([
    { source: 'x-api-key', headers: { 'x-api-key': 'sa_demo' } },
    { source: 'x-service-api-key', headers: { 'x-service-api-key': 'sa_demo' } },
    { source: 'authorization: Bearer', headers: { authorization: 'Bearer sa_demo' } }
  ])('answers 401 INVALID_CREDENTIAL_TYPE for an sa_* id in $source without calling the upstream', async ({ headers }) => {
    const answer = await call('/v1/policies', { headers })
    expectGatewayError(answer, 401, 'INVALID_CREDENTIAL_TYPE')
    expect(upstream.requests).toEqual([])
  })

  it('answers 401 INVALID_CREDENTIAL_TYPE for an sa_* id in the query parameter without calling the upstream', async () => {
    const answer = await call('/v1/policies?token=sa_demo')
    expectGatewayError(answer, 401, 'INVALID_CREDENTIAL_TYPE')
    expect(upstream.requests).toEqual([])
  })

  it('answers 400 CREDENTIALS_CONFLICT for two different credentials without calling the upstream', async () => {
    const answer = await call('/v1/policies', { headers: { 'x-api-key': ADMIN_KEY, authorization: `Bearer ${ALICE}` } })
    expectGatewayError(answer, 400, 'CREDENTIALS_CONFLICT')
    expect(upstream.requests).toEqual([])
  })

  it('answers 401 AUTH_INVALID for a malformed credential without calling the upstream', async () => {
    const answer = await call('/v1/policies', { headers: { authorization: 'Basic ZGVtbzp4' } })
    expectGatewayError(answer, 401, 'AUTH_INVALID')
    expect(upstream.requests).toEqual([])
  })

  it('forwards a call with no credential with no credential header at all', async () => {
    const answer = await call('/v1/policies')
    expect(answer.status).toBe(200)
    expect(credentialHeadersOf(only(upstream.requests))).toEqual({})
  })

  it('substitutes :id in the rewrite and keeps the query', async () => {
    const answer = await call('/v1/policies/pol_123?expand=rules&x=1', { headers: { 'x-api-key': ADMIN_KEY } })
    expect(answer.status).toBe(200)
    const forwarded = only(upstream.requests)
    expect(forwarded.method).toBe('GET')
    expect(forwarded.url).toBe('/v4/policies/pol_123?expand=rules&x=1')
  })

  it('substitutes several parameters, in the order the rewrite names them', async () => {
    const answer = await call('/v1/teams/red/policies/pol_9', { headers: { 'x-api-key': ADMIN_KEY } })
    expect(answer.status).toBe(200)
    expect(only(upstream.requests).url).toBe('/v4/policies/pol_9/teams/red')
  })

  it('keeps a substituted parameter percent-encoded, so it stays one path segment', async () => {
    const answer = await call('/v1/policies/a%2Fb%20c', { headers: { 'x-api-key': ADMIN_KEY } })
    expect(answer.status).toBe(200)
    expect(only(upstream.requests).url).toBe('/v4/policies/a%2Fb%20c')
  })

  it('answers 403 FORBIDDEN, forwarding nothing, when a parameter puts the rewritten path under a blocked prefix', async () => {
    for (const area of ['internal', 'INTERNAL', 'internal;x=1', '%69nternal']) {
      const answer = await call(`/v1/areas/${area}/keys`, { headers: { 'x-api-key': ADMIN_KEY } })
      expectGatewayError(answer, 403, 'FORBIDDEN')
      expect(upstream.requests).toHaveLength(0)
    }
    // Before credentials are read (docs/decisions.md, order of checks): two of them, or a malformed one, still get 403.
    for (const headers of [{ 'x-api-key': 'key_a', authorization: 'Bearer t' }, { 'x-api-key': 'a b' }] as Headers[]) {
      expectGatewayError(await call('/v1/areas/internal/keys', { headers }), 403, 'FORBIDDEN')
    }
    // SPEC 12: the refused calls are the client's own in the registry, not an `anonymous` one's.
    const route = (await send(gw.adminUrl, '/admin/migration')).json.tenants.acme.routes['GET /v1/areas/:area/:item']
    expect(route.clients.map((client: { clientId: string }) => client.clientId)).not.toContain('anonymous')
    expect(route.clients).toContainEqual(expect.objectContaining({ clientId: `fp:${createHash('sha256').update(ADMIN_KEY).digest('hex').slice(0, 16)}`, requests: 4 }))
    // /admin/explain tells the same.
    const explained = await send(gw.adminUrl, '/admin/explain', { json: { method: 'GET', path: '/v1/areas/internal/keys', headers: { 'x-api-key': ADMIN_KEY } } })
    expect(explained.json.answer).toMatchObject({ status: 403, code: 'FORBIDDEN' })
    expect(explained.json.calls).toEqual([])
    expect(upstream.requests).toHaveLength(0)
    const allowed = await call('/v1/areas/policies/pol_1', { headers: { 'x-api-key': ADMIN_KEY } })
    expect(allowed.status).toBe(200)
    expect(only(upstream.requests).url).toBe('/v4/policies/pol_1')
  })

  it('streams a POST body to the rewritten path unchanged', async () => {
    const body = JSON.stringify({ name: 'strict', rules: [1, 2, 3] })
    const answer = await call('/v1/policies', { headers: { 'x-api-key': ADMIN_KEY, 'content-type': 'application/json' }, body })
    expect(answer.status).toBe(200)
    const forwarded = only(upstream.requests)
    expect(forwarded.method).toBe('POST')
    expect(forwarded.url).toBe('/v4/policies')
    expect(forwarded.body.toString('utf8')).toBe(body)
  })

  it('sends the request id upstream and back on a proxy route', async () => {
    const answer = await call('/v1/policies', { headers: { 'x-api-key': ADMIN_KEY, 'x-request-id': 'proxy-req-1' } })
    expect(answer.status).toBe(200)
    expect(only(upstream.requests).headers['x-request-id']).toBe('proxy-req-1')
    expect(answer.headers['x-request-id']).toBe('proxy-req-1')
  })

  it('sends the replacement request id upstream, not the invalid incoming one, on a proxy route', async () => {
    const answer = await call('/v1/policies', { headers: { 'x-api-key': ADMIN_KEY, 'x-request-id': 'not a valid id' } })
    expect(answer.status).toBe(200)
    const replaced = answer.headers['x-request-id']
    expect(replaced).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    expect(only(upstream.requests).headers['x-request-id']).toBe(replaced)
  })
})

describe('proxy routes towards the simulator', () => {
  const sim = useSimulator({
    serviceKeys: { ...DEFAULT_SIMULATOR_OPTIONS.serviceKeys, [REVOCABLE_KEY]: { subject: 'sa_revocable', roles: ['admin'] } }
  })
  const gw = useGateway(() => proxyConfig(sim.url))

  async function call(path: string, options: Parameters<typeof send>[2] = {}): Promise<Answer> {
    sim.simulator.resetCalls()
    return send(gw.url, path, options)
  }

  it('lists policies with a key_* sent as x-api-key: the backend answers 200', async () => {
    const answer = await call('/v1/policies', { headers: { 'x-api-key': ADMIN_KEY } })
    expect(answer.status).toBe(200)
    expect(Array.isArray(answer.json.policies)).toBe(true)
    expect(sim.simulator.calls.map((recorded) => `${recorded.method} ${recorded.url}`)).toEqual(['GET /v4/policies'])
  })

  it('lists policies with a key_* sent in the query parameter: the backend answers 200', async () => {
    const answer = await call(`/v1/policies?token=${ADMIN_KEY}`)
    expect(answer.status).toBe(200)
    expect(sim.simulator.calls.map((recorded) => recorded.url)).toEqual(['/v4/policies'])
  })

  it('creates a policy with a key_* sent as authorization: Bearer: the backend answers 201', async () => {
    const answer = await call('/v1/policies', { headers: { authorization: `Bearer ${ADMIN_KEY}` }, json: { name: 'from-key' } })
    expect(answer.status).toBe(201)
    expect(answer.json.policy.name).toBe('from-key')
  })

  it('creates a policy with an admin session token sent as x-session-token: the backend answers 201', async () => {
    const answer = await call('/v1/policies', { headers: { 'x-session-token': ALICE }, json: { name: 'from-alice' } })
    expect(answer.status).toBe(201)
    expect(sim.simulator.calls[0]?.headers.authorization).toBe(`Bearer ${ALICE}`)
  })

  it('passes the backend 403 FORBIDDEN through unchanged for a session token without the admin role on POST', async () => {
    const answer = await call('/v1/policies', { headers: { authorization: `Bearer ${BOB}`, 'x-request-id': 'bob-post-1' }, json: { name: 'from-bob' } })
    expect(answer.status).toBe(403)
    expect(answer.json).toEqual({
      error: { code: 'FORBIDDEN', message: 'forbidden: this mutation needs the admin role' },
      meta: { requestId: 'bob-post-1', timingMs: { total: expect.any(Number) } }
    })
    expect(sim.simulator.countCalls('POST', '/v4/policies')).toBe(1)
  })

  it('forwards nothing when nothing is presented and passes the backend 401 AUTH_INVALID through unchanged', async () => {
    const answer = await call('/v1/policies', { headers: { 'x-request-id': 'anonymous-1' } })
    expect(answer.status).toBe(401)
    expect(answer.json).toEqual({
      error: { code: 'AUTH_INVALID', message: 'missing credential: send x-service-api-key: <key_*> or Authorization: Bearer <session-token>' },
      meta: { requestId: 'anonymous-1', timingMs: { total: expect.any(Number) } }
    })
    expect(sim.simulator.calls).toHaveLength(1)
    expect(credentialHeadersOf(sim.simulator.calls[0] as { headers: Record<string, string | string[] | undefined> })).toEqual({})
  })

  it('passes the backend rejection of a revoked key through unchanged', async () => {
    const before = await call('/v1/policies', { headers: { 'x-api-key': REVOCABLE_KEY } })
    expect(before.status).toBe(200)
    sim.simulator.revokeKey(REVOCABLE_KEY)
    const after = await call('/v1/policies', { headers: { 'x-api-key': REVOCABLE_KEY, 'x-request-id': 'revoked-1' } })
    expect(after.status).toBe(401)
    expect(after.json).toEqual({
      error: { code: 'AUTH_REVOKED', message: 'service-account token has been revoked' },
      meta: { requestId: 'revoked-1', timingMs: { total: expect.any(Number) } }
    })
    expect(sim.simulator.calls[0]?.headers['x-service-api-key']).toBe(REVOCABLE_KEY)
  })

  it('passes the backend 404 through for a policy id the backend has no route for', async () => {
    const answer = await call('/v1/policies/pol_missing?x=1', { headers: { 'x-api-key': ADMIN_KEY } })
    expect(answer.status).toBe(404)
    expect(answer.json.error.code).toBe('NOT_FOUND')
    expect(sim.simulator.calls.map((recorded) => recorded.url)).toEqual(['/v4/policies/pol_missing?x=1'])
  })
})

describe('a proxy route whose upstream fails (SPEC 7: the gateway\'s 502/504 errors; SPEC 13: its deprecation headers)', () => {
  it('answers 502 UPSTREAM_UNAVAILABLE in the envelope, with the route\'s deprecation headers and a successor link to its V4 path', async () => {
    const origin = await refusingOrigin()
    const gateway = await startGateway(
      testConfig(origin, { tenants: { acme: { upstream: { staging: origin }, legacy: { routes: PROXY_ROUTES, deprecation: { date: '2026-01-01T00:00:00Z' } } } } })
    )
    const answer = await send(gateway.url, '/v1/policies/p-1', { headers: { 'x-api-key': ADMIN_KEY, 'x-request-id': 'proxy-down-1' } })
    sharedExpectGatewayError(answer, 502, 'UPSTREAM_UNAVAILABLE')
    expect(answer.headers['x-request-id']).toBe('proxy-down-1')
    expect(answer.headers.deprecation).toBe('@1767225600')
    expect(answer.headers.link).toContain('</v4/policies/p-1>; rel="successor-version"')
  })
})

describe('a proxy route whose rewrite lands on a V4 runtime endpoint (SPEC 5: key_* for admin APIs only)', () => {
  const upstream = useRecordingUpstream()
  const gw = useGateway(() =>
    testConfig(upstream.url, { tenants: { acme: { upstream: { staging: upstream.url }, legacy: { routes: [{ method: 'POST', path: '/v1/ops/:op', action: 'proxy', rewrite: '/v4/:op' }, { method: 'POST', path: '/v1/runs/:id/exec', action: 'proxy', rewrite: '/v4/sessions/:id/executions.execute' }, { method: 'GET', path: '/v1/get/:op', action: 'proxy', rewrite: '/v4/:op' }] } } } })
  )

  // A session id holding an encoded slash stays one segment on the way (a router keeps %2F inside it).
  it.each(['/v1/ops/execute', '/v1/ops/sessions.start', '/v1/ops/Execute', '/v1/runs/s-1/exec', '/v1/runs/a%2Fb/exec', '/v1/runs/%3Bx/exec'])('refuses a key_* credential on %s, a V4 runtime endpoint once rewritten, with 401 AUTH_INVALID, sending nothing', async (path) => {
    const before = upstream.requests.length
    const answer = await send(gw.url, path, { headers: { 'x-api-key': ADMIN_KEY }, json: { input: 1 } })
    sharedExpectGatewayError(answer, 401, 'AUTH_INVALID')
    expect(answer.json.error.message).toContain('admin/config APIs only')
    expect(upstream.requests.length).toBe(before)
  })

  it.each([
    ['no credential, forwarded as nothing (SPEC 5: the backend answers)', '/v1/ops/execute', 'POST', {}],
    ['a key_* on a path that only looks like one (a ; inside the segment)', '/v1/ops/execute%3Bv=2', 'POST', { 'x-api-key': ADMIN_KEY }],
    ['a key_* on a GET, which no runtime endpoint takes', '/v1/get/execute', 'GET', { 'x-api-key': ADMIN_KEY }]
  ] as const)('forwards %s', async (_what, path, method, headers) => {
    const before = upstream.requests.length
    const answer = await send(gw.url, path, { method, headers, ...(method === 'POST' ? { json: { input: 1 } } : {}) })
    expect(answer.status).toBe(200)
    expect(upstream.requests.length).toBe(before + 1)
  })

  it('sends a session token there as Authorization: Bearer, and a key_* to an admin path as x-service-api-key', async () => {
    expect((await send(gw.url, '/v1/ops/execute', { headers: { 'x-session-token': ALICE }, json: { input: 1 } })).status).toBe(200)
    expect(credentialHeadersOf(upstream.requests.at(-1) as RecordedRequest)).toEqual({ authorization: `Bearer ${ALICE}` })
    expect((await send(gw.url, '/v1/ops/policies', { headers: { 'x-api-key': ADMIN_KEY }, json: { name: 'p' } })).status).toBe(200)
    expect(credentialHeadersOf(upstream.requests.at(-1) as RecordedRequest)).toEqual({ 'x-service-api-key': ADMIN_KEY })
  })
})
