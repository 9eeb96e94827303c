import { describe, expect, it } from 'vitest'
import { expectGatewayError } from '../helpers/gateway-error.js'
import { send } from '../helpers/http.js'
import { startGateway, testConfig, useGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { until } from '../helpers/until.js'

const ADMIN_TOKEN = 'admin-token-for-tests-0123456789'
const ALICE = { authorization: 'Bearer demo-token-alice' }
const BOB = { authorization: 'Bearer demo-token-bob' }

describe('the admin listener', () => {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }
  const sim = useSimulator()
  const gw = useGateway(() =>
    testConfig(sim.url, {
      admin: { token: ADMIN_TOKEN },
      tenants: { acme: { upstream: { staging: sim.url } }, beta: { upstream: { staging: sim.url } } }
    })
  )

  it('answers 401 AUTH_INVALID on /admin/* without the admin token', async () => {
    for (const [method, path] of [['GET', '/admin/sessions'], ['DELETE', '/admin/sessions'], ['POST', '/admin/reload'], ['POST', '/admin/explain'], ['GET', '/admin/migration']] as const) {
      const answer = await send(gw.adminUrl, path, { method })
      expectGatewayError(answer, 401, 'AUTH_INVALID')
    }
  })

  it('answers 401 AUTH_INVALID on /admin/* spelled with percent-encoded letters, which route to the same endpoints', async () => {
    const spellings = [
      ['GET', '/%61dmin/sessions'],
      ['DELETE', '/%61dmin/sessions'],
      ['POST', '/%61dmin/reload'],
      ['GET', '/admin/%73essions'],
      ['GET', '/%61%64%6d%69%6e/migration'],
      ['GET', '/%61dmin/no-such-endpoint']
    ] as const
    for (const [method, path] of spellings) {
      const answer = await send(gw.adminUrl, path, { method })
      expect(answer.status, `${method} ${path}`).toBe(401)
      expect(answer.json.error.code).toBe('AUTH_INVALID')
    }
    // The same spelling with the token reaches the endpoint: the check is on the route, not on the text.
    expect((await send(gw.adminUrl, '/%61dmin/sessions', { headers: admin })).status).toBe(200)
  })

  it('answers admin errors with the request id sent, or a new UUID for an invalid one (SPEC 6)', async () => {
    const kept = await send(gw.adminUrl, '/admin/sessions', { headers: { 'x-request-id': 'admin-call.42' } })
    expect(kept.status).toBe(401)
    expect(kept.headers['x-request-id']).toBe('admin-call.42')
    expect(kept.json.meta.requestId).toBe('admin-call.42')
    const replaced = await send(gw.adminUrl, '/admin/no-such-endpoint', { headers: { ...admin, 'x-request-id': 'not valid!' } })
    expect(replaced.status).toBe(404)
    expect(replaced.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    expect(replaced.json.meta.requestId).toBe(replaced.headers['x-request-id'])
  })

  it('answers 401 AUTH_INVALID on /admin/* with a wrong token, including one that is a prefix of the right one', async () => {
    for (const token of ['wrong', ADMIN_TOKEN.slice(0, -1), `${ADMIN_TOKEN}x`]) {
      const answer = await send(gw.adminUrl, '/admin/sessions', { headers: { authorization: `Bearer ${token}` } })
      expect(answer.status).toBe(401)
    }
  })

  it('keeps /healthz, /readyz and /metrics open when the admin token is set', async () => {
    expect((await send(gw.adminUrl, '/healthz')).status).toBe(200)
    expect((await send(gw.adminUrl, '/readyz')).status).toBe(200)
    const metrics = await send(gw.adminUrl, '/metrics')
    expect(metrics.status).toBe(200)
    expect(metrics.headers['content-type']).toContain('text/plain')
  })

  it('counts session-map entries per tenant and clears one tenant or all', async () => {
    await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'a' } })
    await send(gw.url, '/v1/runs/invoke', { headers: BOB, json: { input: 1, stateId: 'a' } })
    await send(gw.url, '/v1/runs/invoke', { headers: { ...ALICE, 'x-tenant-id': 'beta' }, json: { input: 1, stateId: 'a' } })
    const listed = await send(gw.adminUrl, '/admin/sessions', { headers: admin })
    expect(listed.json).toEqual({ total: 3, tenants: { acme: 2, beta: 1 } })

    const cleared = await send(gw.adminUrl, '/admin/sessions?tenant=acme', { method: 'DELETE', headers: admin })
    expect(cleared.json).toEqual({ deleted: 2 })
    expect((await send(gw.adminUrl, '/admin/sessions', { headers: admin })).json).toEqual({ total: 1, tenants: { beta: 1 } })

    const startsBefore = sim.simulator.countCalls('POST', '/v4/sessions.start')
    await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'a' } })
    expect(sim.simulator.countCalls('POST', '/v4/sessions.start')).toBe(startsBefore + 1)

    expect((await send(gw.adminUrl, '/admin/sessions', { method: 'DELETE', headers: admin })).json).toEqual({ deleted: 2 })
  })

  it('explains a legacy call as the V4 calls it becomes, credentials redacted, sending nothing', async () => {
    sim.simulator.resetCalls()
    const answer = await send(gw.adminUrl, '/admin/explain', {
      headers: admin,
      json: { method: 'POST', path: '/v1/runs/run-7/invoke', headers: { 'x-api-key': 'demo-token-alice' }, body: { input: 'x', policy: 'p', state: { route: 'r' }, risk: 'high' } }
    })
    expect(answer.status).toBe(200)
    expect(answer.json.trafficClass).toBe('legacy')
    expect(answer.json.action).toBe('session-execute')
    expect(answer.json.calls.map((call: { url: string }) => new URL(call.url).pathname)).toEqual(['/v4/sessions.start', '/v4/sessions/%7BsessionId%7D/executions.execute'])
    expect(answer.json.calls[0].body).toEqual({ route: 'r', risk: 'high' })
    expect(answer.json.calls[1].body).toEqual({ input: 'x', policy: 'p' })
    expect(answer.text).not.toContain('demo-token-alice')
    expect(sim.simulator.calls).toEqual([])
  })

  it('explains a request naming a tenant it does not know with SPEC 9\'s tenant and trafficClass, both null', async () => {
    const answer = await send(gw.adminUrl, '/admin/explain', { headers: admin, json: { method: 'GET', path: '/v4/policies', headers: { 'x-tenant-id': 'nobody' } } })
    expect(answer.status).toBe(200)
    expect(answer.json).toMatchObject({ tenant: null, trafficClass: null, calls: [], answer: { status: 404, code: 'TENANT_UNKNOWN' } })
    expect(Object.keys(answer.json).slice(0, 2)).toEqual(['tenant', 'trafficClass'])
  })

  it('explains a refused call as the gateway answer it gets', async () => {
    const answer = await send(gw.adminUrl, '/admin/explain', { headers: admin, json: { method: 'POST', path: '/v1/headless/runs', headers: { 'x-api-key': 'key_live_secret' }, body: { input: 1 } } })
    expect(answer.json.answer).toEqual({ status: 401, code: 'AUTH_INVALID', message: expect.stringContaining('admin/config APIs only') })
    expect(answer.json.calls).toEqual([])
    expect(answer.text).not.toContain('key_live_secret')
  })

  it('explains a legacy body nested too deeply to send as the 400 the traffic listener gives it', async () => {
    const depth = 100_000
    const request = JSON.stringify({ method: 'POST', path: '/v1/headless/runs', headers: { authorization: 'Bearer demo-token-alice' }, body: { input: 'x' } })
    const explained = await send(gw.adminUrl, '/admin/explain', { headers: { ...admin, 'content-type': 'application/json' }, body: request.replace('"x"', `${'['.repeat(depth)}${']'.repeat(depth)}`) })
    expect(explained.status).toBe(200)
    expect(explained.json.answer).toMatchObject({ status: 400, code: 'INVALID_REQUEST', message: 'request body is nested too deeply to pass on' })
    expect(explained.json.calls).toEqual([])
  })

  it('explains a native body nested too deeply to print as the streamed call it is, not a 500', async () => {
    const depth = 100_000
    const deep = `${'['.repeat(depth)}${']'.repeat(depth)}`
    const parsed = JSON.stringify({ method: 'POST', path: '/v4/execute', headers: { authorization: 'Bearer demo-token-alice' }, body: 'x' }).replace('"x"', deep)
    const asParsed = await send(gw.adminUrl, '/admin/explain', { headers: { ...admin, 'content-type': 'application/json' }, body: parsed })
    expect(asParsed.status).toBe(200)
    expect(asParsed.json.calls).toHaveLength(1)
    expect(asParsed.json.calls[0]).toMatchObject({ method: 'POST', body: expect.stringContaining('nested too deeply to print') })
    const asText = await send(gw.adminUrl, '/admin/explain', { headers: admin, json: { method: 'POST', path: '/v4/execute', headers: { authorization: 'Bearer demo-token-alice' }, rawBody: deep } })
    expect(asText.status).toBe(200)
    expect(asText.json.calls[0].body).toBe(deep)
  })

  it('explains a legacy body over limits.bodyBytes as the 413 the traffic listener gives it', async () => {
    const limited = await startGateway(testConfig(sim.url, { limits: { bodyBytes: 10 } }))
    const request = { method: 'POST', path: '/v1/headless/runs', headers: { authorization: 'Bearer demo-token-alice' }, body: { input: '0123456789abcdef' } }
    const explained = await send(limited.adminUrl, '/admin/explain', { json: request })
    expect(explained.json.answer).toMatchObject({ status: 413, code: 'PAYLOAD_TOO_LARGE' })
    expect(explained.json.calls).toEqual([])
    expect((await send(limited.url, request.path, { headers: request.headers, json: request.body })).status).toBe(413)
  })

  it('explains native traffic with the headers the upstream gets: hop-by-hop ones gone, x-forwarded-* and the request id added', async () => {
    const answer = await send(gw.adminUrl, '/admin/explain', {
      headers: admin,
      json: { method: 'POST', path: '/v4/execute', headers: { connection: 'keep-alive, x-drop', 'x-drop': '1', te: 'trailers', host: 'legacy.example', 'x-request-id': 'explained-1', 'x-custom': 'kept' }, body: { input: 1 } }
    })
    expect(answer.json.calls).toHaveLength(1)
    const { headers } = answer.json.calls[0]
    for (const gone of ['connection', 'x-drop', 'te', 'host']) expect(headers[gone]).toBeUndefined()
    expect(headers).toMatchObject({ 'x-custom': 'kept', 'x-request-id': 'explained-1', 'x-forwarded-host': 'legacy.example', 'x-forwarded-proto': 'http', 'x-forwarded-for': '(client address)' })
  })

  it('explains a GET with a body as a call without one: GET bodies are never sent on', async () => {
    const answer = await send(gw.adminUrl, '/admin/explain', { headers: admin, json: { method: 'GET', path: '/v4/policies', body: { a: 1 } } })
    expect(answer.json.calls).toHaveLength(1)
    expect(answer.json.calls[0].body).toBeUndefined()
    expect(answer.json.calls[0].headers['content-type']).toBeUndefined()
  })

  it('answers 400 INVALID_REQUEST to DELETE /admin/sessions naming two tenants, deleting nothing', async () => {
    await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'kept-by-a-bad-delete' } })
    const before = gw.gateway.sessionStore.size
    expect(before).toBeGreaterThan(0)
    const answer = await send(gw.adminUrl, '/admin/sessions?tenant=acme&tenant=other', { method: 'DELETE', headers: admin })
    expect(answer.status).toBe(400)
    expect(answer.json.error.details).toEqual([expect.objectContaining({ pointer: 'query:tenant' })])
    expect(gw.gateway.sessionStore.size).toBe(before)
  })

  // `?tenant=$T` with T unset: read as absent, it cleared every tenant's sessions.
  it('answers 400 INVALID_REQUEST to DELETE /admin/sessions with an empty tenant, deleting nothing', async () => {
    await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'kept-by-an-empty-tenant' } })
    const before = gw.gateway.sessionStore.size
    expect(before).toBeGreaterThan(0)
    const answer = await send(gw.adminUrl, '/admin/sessions?tenant=', { method: 'DELETE', headers: admin })
    expect(answer.status).toBe(400)
    expect(answer.json.error).toMatchObject({ code: 'INVALID_REQUEST', details: [expect.objectContaining({ pointer: 'query:tenant' })] })
    expect(gw.gateway.sessionStore.size).toBe(before)
  })

  it.each(['/admin/brownouts/pause', '/admin/migration/stage', '/admin/shadow'])('answers 400 INVALID_REQUEST to DELETE %s with an empty route, rather than acting on the whole tenant', async (path) => {
    const answer = await send(gw.adminUrl, `${path}?tenant=acme&route=`, { method: 'DELETE', headers: admin })
    expect(answer.status).toBe(400)
    expect(answer.json.error).toMatchObject({ code: 'INVALID_REQUEST', details: [expect.objectContaining({ pointer: 'query:route' })] })
  })

  it('answers 400 INVALID_REQUEST to an explain body without method and path', async () => {
    const answer = await send(gw.adminUrl, '/admin/explain', { headers: admin, json: { path: 'nope' } })
    expect(answer.status).toBe(400)
    expect(answer.json.error.details.map((detail: { pointer: string }) => detail.pointer).sort()).toEqual(['/method', '/path'])
  })

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/xml'])('answers 415 UNSUPPORTED_MEDIA_TYPE to an explain body of type %s, whatever it holds', async (type) => {
    const answer = await send(gw.adminUrl, '/admin/explain', { headers: { ...admin, 'content-type': type }, body: JSON.stringify({ method: 'GET', path: '/v4/x' }) })
    expect(answer.status).toBe(415)
    expect(answer.json.error).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE', message: 'explain takes an application/json body' })
  })

  it('answers 400 INVALID_REQUEST to an explain body that is not valid JSON', async () => {
    const answer = await send(gw.adminUrl, '/admin/explain', { headers: { ...admin, 'content-type': 'application/json; charset=utf-8' }, body: '{"method": "GET",' })
    expect(answer.status).toBe(400)
    expect(answer.json.error).toMatchObject({ code: 'INVALID_REQUEST', message: 'the explain body is not valid JSON' })
  })

  it('reloads and clears with an empty body of any type, as `curl -d ""` sends a form type, or a JSON one', async () => {
    for (const [type, body] of [['application/x-www-form-urlencoded', ''], ['text/plain', ''], ['application/json', ''], ['application/json', '{"reason":"rotate"}']] as const) {
      const reload = await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { ...admin, 'content-type': type }, body })
      // This gateway has no file to re-read, so the reload itself is answered as rejected: what counts is that it ran.
      expect(reload.json.error?.problems, `${type} ${body}`).toEqual(['this gateway was not started from a config file'])
      const clear = await send(gw.adminUrl, '/admin/sessions?tenant=beta', { method: 'DELETE', headers: { ...admin, 'content-type': type }, body })
      expect(clear.status, `${type} ${body}`).toBe(200)
    }
  })

  // SPEC 14: the admin calls that change state take JSON bodies only, and change nothing otherwise.
  it.each([
    ['text/plain', 'x'],
    ['application/x-www-form-urlencoded', 'tenant=acme'],
    ['application/xml', '<x/>']
  ])('answers 415 UNSUPPORTED_MEDIA_TYPE to a reload or session deletion with a %s body, changing nothing', async (type, body) => {
    await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: `kept-by-a-${type}-body` } })
    const before = gw.gateway.sessionStore.size
    expect(before).toBeGreaterThan(0)
    for (const [method, path] of [['POST', '/admin/reload'], ['DELETE', '/admin/sessions'], ['DELETE', '/admin/sessions?tenant=acme']] as const) {
      const answer = await send(gw.adminUrl, path, { method, headers: { ...admin, 'content-type': type, 'x-request-id': 'refused-change-415' }, body })
      expect(answer.status, `${method} ${path}`).toBe(415)
      expect(answer.json.error.code).toBe('UNSUPPORTED_MEDIA_TYPE')
    }
    expect(gw.gateway.sessionStore.size).toBe(before)
    // A refused call is no change: no `admin change` line.
    expect(gw.logs.lines().filter((line) => line.msg === 'admin change' && line.requestId === 'refused-change-415')).toEqual([])
  })

  it('answers 400 INVALID_REQUEST to a reload or session deletion whose JSON body does not parse', async () => {
    for (const [method, path] of [['POST', '/admin/reload'], ['DELETE', '/admin/sessions']] as const) {
      const answer = await send(gw.adminUrl, path, { method, headers: { ...admin, 'content-type': 'application/json' }, body: '{broken' })
      expect(answer.status, `${method} ${path}`).toBe(400)
      expect(answer.json.error.code).toBe('INVALID_REQUEST')
    }
  })

  it('reports legacy traffic per tenant and route in SPEC 12 shape, with distinct clients by client id (a user agent change is the same client)', async () => {
    await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'user-agent': 'old-sdk/1.0' }, json: { input: 1 } })
    await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'user-agent': 'old-sdk/1.0' }, json: { input: 2 } })
    await send(gw.url, '/v1/headless/runs', { headers: { ...BOB, 'user-agent': 'old-sdk/1.0' }, json: { input: 3 } })
    await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'user-agent': 'other-sdk/2.0' }, json: { input: 4 } })
    await send(gw.url, '/v4/execute', { headers: ALICE, json: { input: 5 } })
    const report = await send(gw.adminUrl, '/admin/migration', { headers: admin })
    expect(report.json).toMatchObject({ schemaVersion: 2, scope: 'replica' })
    const route = report.json.tenants.acme.routes['POST /v1/headless/runs']
    expect(route.requests).toBe(4)
    expect(route.distinctClients).toBe(2)
    expect(Date.parse(route.lastSeen)).toBeGreaterThan(Date.now() - 60_000)
    // Most recently seen first, with the user agent of its last request.
    expect(route.clients[0]).toMatchObject({ clientId: expect.stringMatching(/^fp:[0-9a-f]{16}$/), userAgent: 'other-sdk/2.0', requests: 3 })
    expect(report.text).not.toContain('demo-token')
    expect(Object.keys(report.json.tenants.acme.routes)).not.toContain('/v4/execute')
    expect(report.json.tenants.acme.legacyShare.at(-1)).toMatchObject({ legacy: expect.any(Number), native: expect.any(Number) })
    expect(report.json.tenants.acme.legacyShare.at(-1).native).toBeGreaterThanOrEqual(1)
  })

  it('exposes request, latency, session-map and credential-rejection metrics without credentials in any label', async () => {
    await send(gw.url, '/v1/headless/runs', { headers: { 'x-api-key': 'key_metrics_secret' }, json: { input: 1 } })
    await send(gw.url, '/v1/headless/runs', { headers: { 'x-api-key': 'sa_metrics_secret' }, json: { input: 1 } })
    // Two different credentials: SPEC 5's conflict, a rejection of its own.
    expect((await send(gw.url, '/v1/headless/runs', { headers: { authorization: 'Bearer conflict_metrics_secret', 'x-session-token': 'other_metrics_secret' }, json: { input: 1 } })).status).toBe(400)
    const text = (await send(gw.adminUrl, '/metrics')).text
    expect(text).toMatch(/v4gw_requests_total\{tenant="acme",class="legacy",route="POST \/v1\/headless\/runs",status_class="2xx",code="200"\} \d+/)
    expect(text).toMatch(/v4gw_requests_total\{tenant="acme",class="native",route="native",status_class="2xx",code="200"\} \d+/)
    expect(text).toMatch(/v4gw_request_duration_seconds_bucket\{le="[^"]+",class="legacy"\}/)
    expect(text).toMatch(/v4gw_upstream_duration_seconds_count\{class="legacy"\} \d+/)
    expect(text).toMatch(/v4gw_session_map_entries \d+/)
    expect(text).toMatch(/v4gw_session_map_events_total\{event="miss"\} \d+/)
    expect(text).toMatch(/v4gw_credential_rejections_total\{reason="AUTH_INVALID"\} \d+/)
    expect(text).toMatch(/v4gw_credential_rejections_total\{reason="INVALID_CREDENTIAL_TYPE"\} \d+/)
    expect(text).toMatch(/v4gw_credential_rejections_total\{reason="CREDENTIALS_CONFLICT"\} \d+/)
    for (const secret of ['key_metrics_secret', 'sa_metrics_secret', 'conflict_metrics_secret', 'other_metrics_secret', 'demo-token-alice', 'demo-token-bob', ADMIN_TOKEN]) expect(text).not.toContain(secret)
  })

  it('times the upstream of streamed native traffic in the access log and the upstream histogram (SPEC 9)', async () => {
    const answer = await send(gw.url, '/v4/execute', { headers: { ...ALICE, 'x-request-id': 'native-upstream-timed' }, json: { input: 6 } })
    expect(answer.status).toBe(200)
    await until(() => gw.logs.lines().some((line) => line.requestId === 'native-upstream-timed'))
    const line = gw.logs.lines().find((entry) => entry.requestId === 'native-upstream-timed') as Record<string, unknown>
    expect(line).toMatchObject({ class: 'native', v4Path: '/v4/execute', status: 200 })
    expect(line.upstreamMs).toEqual(expect.any(Number))
    expect(line.upstreamMs as number).toBeLessThanOrEqual(line.durationMs as number)
    const text = (await send(gw.adminUrl, '/metrics')).text
    expect(text).toMatch(/v4gw_upstream_duration_seconds_count\{class="native"\} [1-9]\d*/)
  })

  it('never labels metrics with an unknown tenant name sent by a client', async () => {
    await send(gw.url, '/v4/execute', { headers: { ...ALICE, 'x-tenant-id': 'attacker-chosen-tenant' }, json: { input: 1 } })
    const text = (await send(gw.adminUrl, '/metrics')).text
    expect(text).not.toContain('attacker-chosen-tenant')
  })
})

// A call that changes state changes only what it names: a key it does not read, or a body on a
// DELETE that reads none, would otherwise widen it to every tenant or the whole tenant.
describe('admin calls that change state refuse what they do not read', () => {
  const sim = useSimulator()
  const gw = useGateway(() => testConfig(sim.url, { tenants: { acme: { upstream: { staging: sim.url } }, beta: { upstream: { staging: sim.url } } } }))
  const sessions = async (): Promise<number> => (await send(gw.adminUrl, '/admin/sessions')).json.total as number

  it('records an accepted change refused for what it asks: its change line, then a refused line with the status', async () => {
    const answer = await send(gw.adminUrl, '/admin/sessions?Tenant=acme', { method: 'DELETE', headers: { 'x-request-id': 'refused-after-line-1' } })
    expect(answer.status).toBe(400)
    const lines = () => gw.logs.lines().filter((entry) => entry.requestId === 'refused-after-line-1' && String(entry.msg).startsWith('admin change'))
    await until(() => lines().length === 2)
    expect(lines().map((entry) => [entry.msg, entry.status])).toEqual([['admin change', undefined], ['admin change refused', 400]])
  })

  it('writes no admin change line for a call refused by its checks (cross-site, media type, invalid JSON)', async () => {
    await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { origin: 'http://evil.example', 'x-request-id': 'no-line-1' } })
    await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { 'content-type': 'text/plain', 'x-request-id': 'no-line-2' }, body: 'x' })
    await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { 'content-type': 'application/json', 'x-request-id': 'no-line-3' }, body: '{' })
    await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { 'x-request-id': 'no-line-4' } })
    await until(() => gw.logs.lines().some((entry) => entry.msg === 'admin change' && entry.requestId === 'no-line-4'))
    expect(gw.logs.lines().filter((entry) => ['no-line-1', 'no-line-2', 'no-line-3'].includes(String(entry.requestId)) && String(entry.msg).startsWith('admin change'))).toEqual([])
  })

  it('masks in its 400 an unread query key that is a credential pasted in the wrong place', async () => {
    const answer = await send(gw.adminUrl, '/admin/sessions?key_live_pasted_as_a_key_77=1', { method: 'DELETE' })
    expect(answer.status).toBe(400)
    expect(answer.text).not.toContain('key_live_pasted_as_a_key_77')
  })

  it('answers 400 naming a misspelled query key, and clears nothing', async () => {
    await send(gw.url, '/v1/runs/invoke', { headers: { ...ALICE, 'x-tenant-id': 'beta' }, json: { input: 1, stateId: 'kept' } })
    expect(await sessions()).toBe(1)
    for (const [method, path] of [
      ['DELETE', '/admin/sessions?Tenant=acme'],
      ['DELETE', '/admin/brownouts/pause?tenant=acme&rout=POST%20/v1/runs/invoke'],
      ['DELETE', '/admin/migration/stage?tenant=acme&rotue=x'],
      ['DELETE', '/admin/shadow?tenant=acme&routes=x'],
      ['POST', '/admin/reload?now=1']
    ] as const) {
      const answer = await send(gw.adminUrl, path, { method })
      const details = expectGatewayError(answer, 400, 'INVALID_REQUEST')
      expect(details[0]?.pointer, path).toMatch(/^query:/)
    }
    expect(await sessions()).toBe(1)
  })

  it('answers 400 to a DELETE whose body names its tenant (the body is not read: every tenant would go), and clears nothing', async () => {
    await send(gw.url, '/v1/runs/invoke', { headers: { ...ALICE, 'x-tenant-id': 'beta' }, json: { input: 1, stateId: 'kept-too' } })
    const before = await sessions()
    expect(before).toBeGreaterThan(0)
    const details = expectGatewayError(await send(gw.adminUrl, '/admin/sessions', { method: 'DELETE', json: { tenant: 'acme', reason: 'cleanup' } }), 400, 'INVALID_REQUEST')
    expect(details[0]?.pointer).toBe('/tenant')
    expect(await sessions()).toBe(before)
    // A body with a reason only (SPEC 14: logged with the change) is fine.
    expect((await send(gw.adminUrl, '/admin/sessions?tenant=acme', { method: 'DELETE', json: { reason: 'cleanup' } })).status).toBe(200)
  })

  // A page in the operator's browser may send a form or a no-cors POST to a loopback admin
  // listener that needs no token: the browser's Origin and Sec-Fetch-Site say whose page it is.
  it('answers 403 to a cross-site call (Origin of another page, or Sec-Fetch-Site), and serves one from its own origin or with neither', async () => {
    const own = new URL(gw.adminUrl)
    const crossSite: Record<string, string>[] = [{ origin: 'http://evil.example' }, { origin: 'null' }, { origin: `http://${own.hostname}:${Number(own.port) + 1}` }, { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }]
    for (const headers of crossSite) {
      const answer = await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { ...headers, 'content-type': 'text/plain' } })
      expectGatewayError(answer, 403, 'FORBIDDEN')
    }
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { origin: own.origin, 'sec-fetch-site': 'same-origin' } })).status).not.toBe(403)
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST' })).status).not.toBe(403)
  })
})

describe('a change\'s reason (SPEC 14: on the admin change line)', () => {
  const sim = useSimulator()
  const gw = useGateway(() => testConfig(sim.url, { tenants: { acme: { upstream: { staging: sim.url }, migration: { stage: 'translate' } } } }))

  it('is refused over 1,000 characters (a longer one would pass the 4 KiB the line logs), and taken at 1,000', async () => {
    for (const [path, body] of [
      ['/admin/migration/stage', { tenant: 'acme', stage: 'translate' }],
      ['/admin/brownouts/pause', { tenant: 'acme', until: new Date(Date.now() + 3_600_000).toISOString() }]
    ] as const) {
      const method = path === '/admin/migration/stage' ? 'PUT' : 'POST'
      const long = await send(gw.adminUrl, path, { method, json: { ...body, reason: 'r'.repeat(1_001) } })
      const details = expectGatewayError(long, 400, 'INVALID_REQUEST')
      expect(details.map((detail) => detail.pointer)).toContain('/reason')
      expect((await send(gw.adminUrl, path, { method, json: { ...body, reason: 'r'.repeat(1_000) } })).status, path).toBe(200)
    }
  })

  it('is on the admin change line, masked, with what the change targets, though its escaped JSON takes the body past the 4 KiB logged whole', async () => {
    const reason = `Bearer tok-in-an-escaped-reason-6 ${'\u0001'.repeat(960)}`
    expect(reason.length).toBeLessThanOrEqual(1_000)
    const answer = await send(gw.adminUrl, '/admin/migration/stage', { method: 'PUT', headers: { 'x-request-id': 'escaped-reason-1' }, json: { tenant: 'acme', stage: 'translate', reason } })
    expect(answer.status).toBe(200)
    const line = gw.logs.lines().find((entry) => entry.msg === 'admin change' && entry.requestId === 'escaped-reason-1') as { body: Record<string, string> }
    expect(line.body).toMatchObject({ tenant: 'acme', stage: 'translate', reason: `Bearer [redacted] ${'\u0001'.repeat(960)}` })
    expect(line.body['(size)']).toMatch(/^\(\d+ characters of JSON/)
    expect(gw.logs.text()).not.toContain('tok-in-an-escaped-reason-6')
  })

  it('keeps the reason on the line of a long body whose other members come first (integer-like keys lead any object)', async () => {
    // Sixteen integer-like keys lead the object; long names (logged, their values not) take its JSON past 4 KiB.
    const padding = Object.fromEntries([
      ...Array.from({ length: 16 }, (_, index) => [String(index), 1]),
      ...Array.from({ length: 10 }, (_, index) => [`padding-${index}-${'x'.repeat(500)}`, 1])
    ])
    const answer = await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { 'x-request-id': 'reason-after-padding-1' }, json: { ...padding, reason: 'rotate after INC-12' } })
    expect(answer.status).not.toBe(403)
    const line = gw.logs.lines().find((entry) => entry.msg === 'admin change' && entry.requestId === 'reason-after-padding-1') as { body: Record<string, string> }
    expect(line.body.reason).toBe('rotate after INC-12')
    expect(Object.keys(line.body)).toHaveLength(17)
  })
})
