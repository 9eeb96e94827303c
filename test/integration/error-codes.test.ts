import { gzipSync } from 'node:zlib'
import { beforeEach, describe, it, expect } from 'vitest'
import { refusingOrigin } from '../helpers/fault-upstream.js'
import { send, type Answer } from '../helpers/http.js'
import { expectGatewayError } from '../helpers/gateway-error.js'
import { rawExchange as exchangeRaw } from '../helpers/raw-http.js'
import { useRecordingUpstream, type RecordedRequest } from '../helpers/recording-upstream.js'
import { useSimulatorGateway } from '../helpers/simulator-gateway.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'
import { until } from '../helpers/until.js'

// SPEC 6: every error the gateway makes itself, in its envelope, with its request id.

const ALICE = { authorization: 'Bearer demo-token-alice' }
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const BODY_LIMIT = 1024

/**
 * One HTTP/1.1 exchange over a raw socket, for what undici will not send (odd request targets,
 * hand-made chunked bodies). The request should carry `Connection: close`.
 */
async function rawExchange(baseUrl: string, request: string): Promise<Answer> {
  const { response } = await exchangeRaw(baseUrl, request, { timeoutMs: 5_000 })
  if (response === undefined) throw new Error('no answer on the raw socket')
  return response
}

function rawGet(baseUrl: string, target: string): Promise<Answer> {
  return rawExchange(baseUrl, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
}

describe('errors the gateway makes in front of the simulator', () => {
  const { sim, gw } = useSimulatorGateway({ limits: { bodyBytes: BODY_LIMIT } })

  async function execute(options: Parameters<typeof send>[2]): Promise<Answer> {
    sim.simulator.resetCalls()
    return send(gw.url, '/v1/headless/runs', { method: 'POST', ...options })
  }

  it('answers 400 INVALID_REQUEST when the legacy body is not JSON', async () => {
    const answer = await execute({ headers: { ...ALICE, 'content-type': 'application/json' }, body: '{"input": ' })
    expectGatewayError(answer, 400, 'INVALID_REQUEST')
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 400 INVALID_REQUEST when the legacy body is a JSON array', async () => {
    const answer = await execute({ headers: ALICE, json: [{ input: 1 }] })
    expectGatewayError(answer, 400, 'INVALID_REQUEST')
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 400 INVALID_REQUEST naming /input when input is missing', async () => {
    const answer = await execute({ headers: ALICE, json: { policy: 'strict' } })
    const details = expectGatewayError(answer, 400, 'INVALID_REQUEST')
    expect(details.map((detail) => detail.pointer)).toEqual(['/input'])
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 400 INVALID_REQUEST naming /policy when policy is not a string', async () => {
    const answer = await execute({ headers: ALICE, json: { input: 1, policy: 5 } })
    const details = expectGatewayError(answer, 400, 'INVALID_REQUEST')
    expect(details.map((detail) => detail.pointer)).toEqual(['/policy'])
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 400 INVALID_REQUEST naming /state/policy when a state field is not a string on session-execute', async () => {
    sim.simulator.resetCalls()
    const answer = await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, state: { policy: 7 } } })
    const details = expectGatewayError(answer, 400, 'INVALID_REQUEST')
    expect(details.map((detail) => detail.pointer)).toEqual(['/state/policy'])
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 400 CREDENTIALS_CONFLICT when two different credentials are presented', async () => {
    const answer = await execute({ headers: { ...ALICE, 'x-api-key': 'demo-token-bob' }, json: { input: 1 } })
    expectGatewayError(answer, 400, 'CREDENTIALS_CONFLICT')
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 401 AUTH_INVALID when a runtime route gets no credential', async () => {
    const answer = await execute({ json: { input: 1 } })
    expectGatewayError(answer, 401, 'AUTH_INVALID')
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 401 INVALID_CREDENTIAL_TYPE when an sa_* id is used as a credential', async () => {
    const answer = await execute({ headers: { 'x-api-key': 'sa_demo' }, json: { input: 1 } })
    expectGatewayError(answer, 401, 'INVALID_CREDENTIAL_TYPE')
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 404 ROUTE_NOT_FOUND for a path that is neither legacy nor /v4/', async () => {
    const answer = await send(gw.url, '/v2/headless/runs', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 404, 'ROUTE_NOT_FOUND')
  })

  it('answers 404 ROUTE_NOT_FOUND for a legacy path with the wrong method', async () => {
    sim.simulator.resetCalls()
    const answer = await send(gw.url, '/v1/headless/runs', { method: 'GET', headers: ALICE })
    expectGatewayError(answer, 404, 'ROUTE_NOT_FOUND')
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 404 TENANT_UNKNOWN for a tenant header naming no configured tenant', async () => {
    sim.simulator.resetCalls()
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-tenant-id': 'globex' }, json: { input: 1 } })
    expectGatewayError(answer, 404, 'TENANT_UNKNOWN')
    expect(answer.text).not.toContain('globex')
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 413 PAYLOAD_TOO_LARGE for a body over limits.bodyBytes with content-length', async () => {
    const body = JSON.stringify({ input: 'x'.repeat(2 * BODY_LIMIT) })
    const answer = await execute({ headers: { ...ALICE, 'content-type': 'application/json' }, body })
    expectGatewayError(answer, 413, 'PAYLOAD_TOO_LARGE')
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 413 PAYLOAD_TOO_LARGE for a chunked body that runs over limits.bodyBytes', async () => {
    sim.simulator.resetCalls()
    const piece = 'x'.repeat(BODY_LIMIT)
    const chunked = [`{"input":"`, piece, piece, `"}`].map((part) => `${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`).join('') + '0\r\n\r\n'
    const answer = await rawExchange(gw.url,
      'POST /v1/headless/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer demo-token-alice\r\n' +
      'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' + chunked)
    expectGatewayError(answer, 413, 'PAYLOAD_TOO_LARGE')
    expect(sim.simulator.calls).toEqual([])
  })

  it('accepts a body of exactly limits.bodyBytes', async () => {
    const frame = JSON.stringify({ input: '' })
    const body = JSON.stringify({ input: 'x'.repeat(BODY_LIMIT - frame.length) })
    expect(Buffer.byteLength(body)).toBe(BODY_LIMIT)
    const answer = await execute({ headers: { ...ALICE, 'content-type': 'application/json' }, body })
    expect(answer.status).toBe(200)
  })

  it('answers 415 UNSUPPORTED_MEDIA_TYPE for a text/plain legacy body', async () => {
    const answer = await execute({ headers: { ...ALICE, 'content-type': 'text/plain' }, body: '{"input":1}' })
    expectGatewayError(answer, 415, 'UNSUPPORTED_MEDIA_TYPE')
    expect(sim.simulator.calls).toEqual([])
  })

  it('answers 415 UNSUPPORTED_MEDIA_TYPE for a gzip-coded legacy body, not 400 "not valid JSON" (RFC 9110 15.5.16)', async () => {
    const answer = await execute({ headers: { ...ALICE, 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzipSync('{"input":1}') })
    expectGatewayError(answer, 415, 'UNSUPPORTED_MEDIA_TYPE')
    expect(answer.json.error.message).toContain('content-coded')
    expect(sim.simulator.calls).toEqual([])
    // identity is no coding at all.
    expect((await execute({ headers: { ...ALICE, 'content-type': 'application/json', 'content-encoding': 'identity' }, body: '{"input":1}' })).status).toBe(200)
  })

  it('answers 415 UNSUPPORTED_MEDIA_TYPE for a legacy body without a content-type', async () => {
    const answer = await execute({ headers: ALICE, body: '{"input":1}' })
    expectGatewayError(answer, 415, 'UNSUPPORTED_MEDIA_TYPE')
    expect(sim.simulator.calls).toEqual([])
  })

  it('keeps a valid incoming x-request-id, sends it upstream and echoes it', async () => {
    const requestId = 'Client.req:42_a-B'
    const answer = await execute({ headers: { ...ALICE, 'x-request-id': requestId }, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-request-id']).toBe(requestId)
    expect(sim.simulator.calls.map((recorded) => recorded.headers['x-request-id'])).toEqual([requestId])
  })

  it('keeps an incoming x-request-id of exactly 128 chars', async () => {
    const requestId = 'r'.repeat(128)
    const answer = await execute({ headers: { ...ALICE, 'x-request-id': requestId }, json: { input: 1 } })
    expect(answer.headers['x-request-id']).toBe(requestId)
    expect(sim.simulator.calls[0]?.headers['x-request-id']).toBe(requestId)
  })

  it.each([
    { case: '200 chars long', requestId: 'r'.repeat(200) },
    { case: '129 chars long', requestId: 'r'.repeat(129) },
    { case: 'containing spaces', requestId: 'has spaces in it' },
    { case: 'containing a slash', requestId: 'a/b' }
  ])('replaces an incoming x-request-id $case with a UUID, upstream and in the answer', async ({ requestId }) => {
    const answer = await execute({ headers: { ...ALICE, 'x-request-id': requestId }, json: { input: 1 } })
    expect(answer.status).toBe(200)
    const replaced = answer.headers['x-request-id']
    expect(replaced).toMatch(UUID)
    expect(answer.json.meta.requestId).toBe(replaced)
    expect(sim.simulator.calls.map((recorded) => recorded.headers['x-request-id'])).toEqual([replaced])
  })

  it('puts a valid incoming x-request-id in the error envelope', async () => {
    const answer = await send(gw.url, '/nowhere', { headers: { 'x-request-id': 'err-req-1' } })
    expectGatewayError(answer, 404, 'ROUTE_NOT_FOUND')
    expect(answer.json.error.requestId).toBe('err-req-1')
  })

  it('replaces an invalid incoming x-request-id with a UUID in the error envelope', async () => {
    const answer = await send(gw.url, '/nowhere', { headers: { 'x-request-id': 'not valid!' } })
    expectGatewayError(answer, 404, 'ROUTE_NOT_FOUND')
    expect(answer.json.error.requestId).toMatch(UUID)
  })

  it('passes a V4 401 AUTH_INVALID for an unknown session token through with its own code and message', async () => {
    const answer = await execute({ headers: { authorization: 'Bearer nobody-knows-me' }, json: { input: 1 } })
    expect(answer.status).toBe(401)
    expect(answer.json.error).toEqual({ code: 'AUTH_INVALID', message: 'unknown session token' })
    expect(sim.simulator.countCalls('POST', '/v4/execute')).toBe(1)
  })

  it('passes a V4 error on native /v4/* traffic through unchanged: its status, code, message and request id (the bytes: native-passthrough.test.ts)', async () => {
    sim.simulator.resetCalls()
    const answer = await send(gw.url, '/v4/execute', { headers: { 'x-service-api-key': 'key_demo_admin', 'x-request-id': 'native-err-1' }, json: { input: 1 } })
    expect(answer.status).toBe(401)
    expect(answer.json.error).toEqual({
      code: 'AUTH_INVALID',
      message: 'missing session token: x-service-api-key is for admin/config APIs only; send Authorization: Bearer <session-token>'
    })
    expect(answer.json.meta.requestId).toBe('native-err-1')
  })

  it('passes a V4 404 SESSION_NOT_FOUND on native traffic through unchanged', async () => {
    const answer = await send(gw.url, '/v4/sessions/ses_nope/executions.execute', { headers: ALICE, json: { input: 1 } })
    expect(answer.status).toBe(404)
    expect(answer.json.error.code).toBe('SESSION_NOT_FOUND')
    expect(answer.json.error.requestId).toBeUndefined()
  })
})

describe('errors for requests that are never forwarded', () => {
  const upstream = useRecordingUpstream()
  // fallback: proxy, so that any spelling that slipped past the blocked check would be forwarded.
  const gw = useGateway(() =>
    testConfig(upstream.url, {
      internalAdmin: { pathPrefixes: ['/internal'] },
      tenants: { acme: { upstream: { staging: upstream.url }, fallback: 'proxy' } }
    })
  )
  beforeEach(() => {
    upstream.requests.length = 0
  })

  it('forwards an ordinary unknown path under fallback: proxy (control for the blocked cases)', async () => {
    const answer = await rawGet(gw.url, '/public/x')
    expect(answer.status).toBe(200)
    expect(upstream.requests.map((request) => request.url)).toEqual(['/public/x'])
    // Its log line names the upstream path and time like any forwarded request (SPEC 9).
    await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.status === 200))
    const line = gw.logs.lines().find((entry) => entry.msg === 'request' && entry.status === 200) as Record<string, unknown>
    expect(line).toMatchObject({ class: 'unknown', v4Path: '/public/x' })
    expect(line.upstreamMs).toEqual(expect.any(Number))
  })

  it.each([
    '/internal',
    '/internal/x',
    '/INTERNAL/x',
    '/Internal/x?y=1',
    '/%69nternal/x',
    '/%49NTERNAL/x',
    '/%2finternal/x',
    '//internal/x',
    '/internal%2fx',
    '/\\internal/x'
  ])('answers 403 FORBIDDEN for %s and forwards nothing', async (target) => {
    const answer = await rawGet(gw.url, target)
    expectGatewayError(answer, 403, 'FORBIDDEN')
    expect(upstream.requests).toEqual([])
  })

  it('answers 403 FORBIDDEN for a blocked path before the tenant is resolved', async () => {
    const answer = await send(gw.url, '/internal/users', { headers: { 'x-tenant-id': 'globex' } })
    expectGatewayError(answer, 403, 'FORBIDDEN')
    expect(upstream.requests).toEqual([])
  })

  it.each([
    '/v4/../internal/x',
    '/v4/..%2finternal/x',
    '/v4/%2e%2e/internal/x',
    '/v4/%2E%2E%2Finternal/x',
    '/public/../internal/x',
    '/v4/..\\internal/x'
  ])('refuses the dot-segment target %s with 400 INVALID_REQUEST and forwards nothing', async (target) => {
    const answer = await rawGet(gw.url, target)
    expectGatewayError(answer, 400, 'INVALID_REQUEST')
    expect(upstream.requests).toEqual([])
  })

  it.each(['/v1/%zz', '/v4/%zz', '/%'])('answers 400 INVALID_REQUEST in the SPEC 6 envelope for the badly percent-encoded path %s', async (target) => {
    const answer = await rawGet(gw.url, target)
    expectGatewayError(answer, 400, 'INVALID_REQUEST')
    expect(upstream.requests).toEqual([])
  })

  // A route's path whose parameter is not UTF-8 is still the route's (SPEC 2): until 2026-11-30 it
  // matched no route, so fallback: proxy sent it, credentials as they came, to the upstream.
  it.each([
    ['a session token', ALICE, 400, 'INVALID_REQUEST'],
    ['a service key', { 'x-api-key': 'key_not_for_runtime' }, 401, 'AUTH_INVALID']
  ] as const)('refuses a legacy route’s path whose parameter is not UTF-8 (%s), as the route’s request, and forwards nothing', async (_name, headers, status, code) => {
    const answer = await send(gw.url, '/v1/runs/%FF/invoke', { headers: { ...headers, 'x-request-id': `bad-param-${status}` }, json: { input: 1 } })
    const details = expectGatewayError(answer, status, code)
    expect(JSON.stringify(details ?? answer.json)).not.toContain('key_not_for_runtime')
    expect(upstream.requests).toEqual([])
    await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.requestId === `bad-param-${status}`))
    expect(gw.logs.lines().find((line) => line.msg === 'request' && line.requestId === `bad-param-${status}`)).toMatchObject({ class: 'legacy', route: 'POST /v1/runs/:runId/invoke', status })
  })

  it('answers 400 INVALID_REQUEST for a path holding an encoded NUL byte', async () => {
    const answer = await rawGet(gw.url, '/v4/a%00b')
    expectGatewayError(answer, 400, 'INVALID_REQUEST')
    expect(upstream.requests).toEqual([])
  })

  it('refuses an absolute-form request target with 400 INVALID_REQUEST and forwards nothing (SPEC 2: never an open proxy)', async () => {
    const answer = await rawGet(gw.url, `${upstream.url}/public/x`)
    expectGatewayError(answer, 400, 'INVALID_REQUEST')
    expect(upstream.requests).toEqual([])
  })
})

describe('errors about the tenant', () => {
  const upstream = useRecordingUpstream()
  const gw = useGateway(() => testConfig(upstream.url, { tenancy: { default: null } }))

  it('answers 400 TENANT_REQUIRED when there is no tenant header and no tenancy.default', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 400, 'TENANT_REQUIRED')
    expect(upstream.requests).toEqual([])
  })

  it('answers 400 TENANT_REQUIRED on native traffic too, forwarding nothing', async () => {
    const answer = await send(gw.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 400, 'TENANT_REQUIRED')
    expect(upstream.requests).toEqual([])
  })

  it('answers 404 TENANT_UNKNOWN when the tenant header names no configured tenant', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-tenant-id': 'initech' }, json: { input: 1 } })
    expectGatewayError(answer, 404, 'TENANT_UNKNOWN')
    expect(upstream.requests).toEqual([])
  })

  it('serves the tenant named by the tenant header when there is no default', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-tenant-id': 'acme' }, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v4/execute'])
  })
})

describe('errors about an upstream that cannot be reached', () => {
  const gw = useGateway(async () => testConfig(await refusingOrigin()))

  it('answers 502 UPSTREAM_UNAVAILABLE when the upstream port is closed (legacy execute)', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 502, 'UPSTREAM_UNAVAILABLE')
  })

  it('answers 502 UPSTREAM_UNAVAILABLE when the upstream port is closed (legacy session-execute)', async () => {
    const answer = await send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 502, 'UPSTREAM_UNAVAILABLE')
  })

  it('answers 502 UPSTREAM_UNAVAILABLE when the upstream port is closed (native /v4/*)', async () => {
    const answer = await send(gw.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 502, 'UPSTREAM_UNAVAILABLE')
  })
})

describe('errors about an upstream answer the gateway cannot read', () => {
  let startAnswer: { status: number; contentType: string; body: string } | 'garbage' | { raw: string }
  const upstream = useRecordingUpstream((request: RecordedRequest, response) => {
    if (startAnswer === 'garbage') {
      response.socket?.end('this is not HTTP\r\n\r\n')
      return
    }
    if ('raw' in startAnswer) {
      response.socket?.end(startAnswer.raw)
      return
    }
    if (request.url === '/v4/sessions.start') {
      response.writeHead(startAnswer.status, { 'content-type': startAnswer.contentType })
      response.end(startAnswer.body)
      return
    }
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end('{"output":{}}')
  })
  const gw = useGateway(() => testConfig(upstream.url))

  async function invoke(stateId: string): Promise<Answer> {
    upstream.requests.length = 0
    return send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId } })
  }

  it('answers 502 UPSTREAM_BAD_RESPONSE when sessions.start answers 201 with {}', async () => {
    startAnswer = { status: 201, contentType: 'application/json', body: '{}' }
    const answer = await invoke('bad-empty')
    expectGatewayError(answer, 502, 'UPSTREAM_BAD_RESPONSE')
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v4/sessions.start'])
  })

  it('answers 502 UPSTREAM_BAD_RESPONSE when sessions.start answers 201 with a body that is not JSON', async () => {
    startAnswer = { status: 201, contentType: 'application/json', body: 'session ses_1 created' }
    const answer = await invoke('bad-text')
    expectGatewayError(answer, 502, 'UPSTREAM_BAD_RESPONSE')
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v4/sessions.start'])
  })

  it('answers 502 UPSTREAM_BAD_RESPONSE when the session id is not a string', async () => {
    startAnswer = { status: 201, contentType: 'application/json', body: '{"sessionId":42}' }
    const answer = await invoke('bad-number')
    expectGatewayError(answer, 502, 'UPSTREAM_BAD_RESPONSE')
  })

  it('caches nothing after UPSTREAM_BAD_RESPONSE: the next call starts a session again', async () => {
    startAnswer = { status: 201, contentType: 'application/json', body: '{}' }
    expectGatewayError(await invoke('bad-retry'), 502, 'UPSTREAM_BAD_RESPONSE')
    startAnswer = { status: 201, contentType: 'application/json', body: '{"sessionId":"ses_good"}' }
    const answer = await invoke('bad-retry')
    expect(answer.status).toBe(200)
    expect(upstream.requests.map((request) => request.url)).toEqual(['/v4/sessions.start', '/v4/sessions/ses_good/executions.execute'])
  })

  it('answers 502 UPSTREAM_BAD_RESPONSE when the upstream answers a legacy call with bytes that are not HTTP', async () => {
    startAnswer = 'garbage'
    const answer = await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 502, 'UPSTREAM_BAD_RESPONSE')
  })

  it('answers 502 UPSTREAM_BAD_RESPONSE when the upstream answers native /v4/* traffic with bytes that are not HTTP', async () => {
    startAnswer = 'garbage'
    const answer = await send(gw.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 502, 'UPSTREAM_BAD_RESPONSE')
  })

  // HTTP, but not an answer undici will take: the upstream answered, badly, so it is not "unreachable".
  // A native answer whose headers went out already can only be cut, so the short body is legacy only.
  describe.each([
    { case: 'a header section over the size limit', raw: `HTTP/1.1 200 OK\r\nx-big: ${'a'.repeat(70_000)}\r\ncontent-length: 2\r\n\r\n{}`, native: true },
    { case: 'a 101 to a request that asked for no upgrade', raw: 'HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: other\r\n\r\n', native: true },
    { case: 'a body shorter than its content-length, then the end of the connection', raw: 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 50\r\n\r\n{}', native: false }
  ])('an upstream answer with $case', ({ raw, native }) => {
    it('answers a legacy call 502 UPSTREAM_BAD_RESPONSE', async () => {
      startAnswer = { raw }
      expectGatewayError(await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } }), 502, 'UPSTREAM_BAD_RESPONSE')
    })

    it.runIf(native)('answers native /v4/* traffic 502 UPSTREAM_BAD_RESPONSE', async () => {
      startAnswer = { raw }
      expectGatewayError(await send(gw.url, '/v4/execute', { headers: ALICE, json: { input: 1 } }), 502, 'UPSTREAM_BAD_RESPONSE')
    })
  })
})

describe('errors about an upstream that never answers', () => {
  // Never answers; its close destroys the stalled sockets.
  const upstream = useRecordingUpstream(() => undefined)
  const gw = useGateway(() => testConfig(upstream.url, { limits: { upstreamTimeoutMs: 200 } }))

  it('answers 504 UPSTREAM_TIMEOUT after limits.upstreamTimeoutMs on a legacy call', async () => {
    const startedAt = performance.now()
    const answer = await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 504, 'UPSTREAM_TIMEOUT')
    expect(performance.now() - startedAt).toBeLessThan(5_000)
    expect(upstream.requests.map((request) => request.url)).toContain('/v4/execute')
  })

  it('answers 504 UPSTREAM_TIMEOUT after limits.upstreamTimeoutMs on native /v4/* traffic', async () => {
    const startedAt = performance.now()
    const answer = await send(gw.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    expectGatewayError(answer, 504, 'UPSTREAM_TIMEOUT')
    expect(performance.now() - startedAt).toBeLessThan(5_000)
  })
})
