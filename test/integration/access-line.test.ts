import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { answerJson, refusingOrigin, resetConnection, startFaultUpstream } from '../helpers/fault-upstream.js'
import { send, type Answer } from '../helpers/http.js'
import { rawExchange } from '../helpers/raw-http.js'
import { useSimulatorGateway } from '../helpers/simulator-gateway.js'
import { ROOT } from '../helpers/spawn-cli.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { until } from '../helpers/until.js'
import { configSchema } from '../../src/config/schema.js'
import { deepFreeze } from '../../src/util/deep-freeze.js'

// SPEC 17, access log: every line carries method, path without the query, clientAddress,
// userAgent (at most 256 characters) and bytesOut; a 404 or tenant error says what was asked
// for; an upstream failure is the access line's `error`, with no other line unless at debug;
// `log.access: false` turns the lines off.

const AUTH = { authorization: 'Bearer demo-token-alice' }
// The simulator's token for alice, sent in the query (SPEC 5 `credentials.queryParam`).
const QUERY_TOKEN = 'demo-token-alice'
let requestCount = 0

/** A request id of the test's own: native answers carry the upstream's headers, not the gateway's. */
function ownRequestId(): Record<string, string> {
  return { 'x-request-id': `access-line-${++requestCount}` }
}

async function accessLineOf(gateway: StartedGateway, answer: Answer, requestId = answer.headers['x-request-id']): Promise<Record<string, unknown>> {
  await until(() => gateway.logs.lines().some((line) => line.msg === 'request' && line.requestId === requestId))
  return gateway.logs.lines().find((line) => line.msg === 'request' && line.requestId === requestId) as Record<string, unknown>
}

describe('the access line (SPEC 17)', () => {
  const { gw } = useSimulatorGateway({ credentials: { queryParam: 'token' } })

  it('names method, path without its query, client address, user agent and body bytes of a legacy call', async () => {
    const answer = await send(gw.url, `/v1/headless/runs?token=${QUERY_TOKEN}&x=1`, {
      headers: { 'user-agent': 'legacy-sdk/1.4' },
      json: { input: { q: 1 } }
    })
    expect(answer.status).toBe(200)
    const line = await accessLineOf(gw, answer)
    expect(line).toMatchObject({ method: 'POST', path: '/v1/headless/runs', clientAddress: '127.0.0.1', userAgent: 'legacy-sdk/1.4', class: 'legacy' })
    expect(line.bytesOut).toBe(Buffer.byteLength(answer.text))
    expect(gw.logs.text()).not.toContain(QUERY_TOKEN)
  })

  it('counts the streamed body of a native call', async () => {
    const id = ownRequestId()
    const answer = await send(gw.url, '/v4/execute', { headers: { ...AUTH, ...id }, json: { input: 'native' } })
    expect(answer.status).toBe(200)
    const line = await accessLineOf(gw, answer, id['x-request-id'])
    expect(line).toMatchObject({ method: 'POST', path: '/v4/execute', class: 'native', status: 200 })
    expect(line.bytesOut).toBe(Buffer.byteLength(answer.text))
    expect(line.bytesOut).toBeGreaterThan(0)
  })

  it('says which path a 404 asked for, and counts the gateway’s own error body', async () => {
    const answer = await send(gw.url, '/v2/nowhere?token=abc', { headers: AUTH })
    expect(answer.status).toBe(404)
    const line = await accessLineOf(gw, answer)
    expect(line).toMatchObject({ path: '/v2/nowhere', error: 'ROUTE_NOT_FOUND', bytesOut: Buffer.byteLength(answer.text) })
    // An answer to HEAD has no body (RFC 9110 9.3.2): none is counted.
    const head = await send(gw.url, '/v2/nowhere', { method: 'HEAD', headers: AUTH })
    expect(head.status).toBe(404)
    expect(await accessLineOf(gw, head)).toMatchObject({ error: 'ROUTE_NOT_FOUND', bytesOut: 0 })
  })

  it('says which tenant a TENANT_UNKNOWN request asked for (the answer does not echo it)', async () => {
    const answer = await send(gw.url, '/v4/execute', { headers: { ...AUTH, 'x-tenant-id': 'ghost-tenant' }, json: { input: 1 } })
    expect(answer.status).toBe(404)
    expect(answer.text).not.toContain('ghost-tenant')
    const line = await accessLineOf(gw, answer)
    expect(line).toMatchObject({ requestedTenant: 'ghost-tenant', error: 'TENANT_UNKNOWN' })
    expect(line.tenant).toBeUndefined()
  })

  it.each([
    ['an absolute-form target', 'http://user:userinfo-secret-1@127.0.0.1:9/v4/x?token=query-secret-1', '/v4/x'],
    ['a network-path target', '//user:userinfo-secret-1@127.0.0.1:9/v4/y?token=query-secret-1', '/v4/y']
  ])('logs only the path of %s, never its userinfo or query', async (_name, target, path) => {
    const id = ownRequestId()
    await rawExchange(gw.url, `GET ${target} HTTP/1.1\r\nHost: gateway.test\r\nx-request-id: ${id['x-request-id']}\r\nConnection: close\r\n\r\n`, { timeoutMs: 3_000 })
    const line = await accessLineOf(gw, { headers: {} } as Answer, id['x-request-id'])
    expect(line.path).toBe(path)
    expect(gw.logs.text()).not.toContain('userinfo-secret-1')
    expect(gw.logs.text()).not.toContain('query-secret-1')
  })

  it('cuts the user agent to 256 characters', async () => {
    const id = ownRequestId()
    const answer = await send(gw.url, '/v4/execute', { headers: { ...AUTH, ...id, 'user-agent': 'u'.repeat(1000) }, json: { input: 1 } })
    const line = await accessLineOf(gw, answer, id['x-request-id'])
    expect(line.userAgent).toBe('u'.repeat(256))
  })
})

describe('an unreachable upstream on the access line (SPEC 17)', () => {
  it('at info: one line, the access line, whose error names the failure and cause its cause; no stack anywhere', async () => {
    const gateway = await startGateway(testConfig(await refusingOrigin()))
    const answer = await send(gateway.url, '/v1/headless/runs', { headers: AUTH, json: { input: 1 } })
    expect(answer.status).toBe(502)
    const line = await accessLineOf(gateway, answer)
    expect(line).toMatchObject({ error: 'UPSTREAM_UNAVAILABLE', cause: 'refused' })
    // Native traffic's streamed call too.
    const id = ownRequestId()
    expect((await send(gateway.url, '/v4/execute', { headers: { ...AUTH, ...id }, json: { input: 1 } })).status).toBe(502)
    expect(await accessLineOf(gateway, answer, id['x-request-id'])).toMatchObject({ error: 'UPSTREAM_UNAVAILABLE', cause: 'refused' })
    const lines = gateway.logs.lines().filter((one) => one.requestId === answer.headers['x-request-id'])
    expect(lines.map((one) => one.msg)).toEqual(['request'])
    expect(gateway.logs.text()).not.toContain('"stack"')
  })

  it('at debug: the failure with its stack on a line of its own as well, with the trace id the access line has', async () => {
    const gateway = await startGateway(testConfig(await refusingOrigin(), { log: { level: 'debug' } }))
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    const answer = await send(gateway.url, '/v1/headless/runs', { headers: { ...AUTH, traceparent }, json: { input: 1 } })
    const line = await accessLineOf(gateway, answer)
    const failure = gateway.logs.lines().find((one) => one.msg === 'upstream failure' && one.requestId === answer.headers['x-request-id'])
    expect(failure?.level).toBe(20)
    expect(JSON.stringify(failure)).toContain('"stack"')
    // SPEC 17: with tracing off, the client's trace, as on the access line.
    expect(line.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736')
    expect(failure?.traceId).toBe(line.traceId)
  })
})

describe('the access line of a request Node refused before the gateway saw it (SPEC 17: every request)', () => {
  it('is written for a header too large, malformed framing and CONNECT: status, error, body bytes, client address; none with log.access false', async () => {
    const gateway = await startGateway(testConfig(await refusingOrigin()))
    const refused = async (request: string): Promise<Record<string, unknown>> => {
      const result = await rawExchange(gateway.url, request)
      const requestId = result.response?.headers['x-request-id'] as string
      await until(() => gateway.logs.lines().some((line) => line.msg === 'request' && line.requestId === requestId))
      const line = gateway.logs.lines().find((one) => one.msg === 'request' && one.requestId === requestId) as Record<string, unknown>
      expect(line.bytesOut).toBe(Buffer.byteLength(result.response?.text ?? ''))
      return line
    }
    expect(await refused(`GET /v4/x HTTP/1.1\r\nHost: a\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`)).toMatchObject({ status: 431, error: 'REQUEST_HEADERS_TOO_LARGE', durationMs: 0, clientAddress: '127.0.0.1' })
    expect(await refused('GET /v4/x HTTP/1.1\r\nHost: a\r\nBroken header line\r\n\r\n')).toMatchObject({ status: 400, error: 'INVALID_REQUEST', clientAddress: '127.0.0.1' })
    expect(await refused('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n')).toMatchObject({ method: 'CONNECT', status: 400, error: 'INVALID_REQUEST' })
    // Its own info line is gone: the access line says it (the parser's code is at debug).
    expect(gateway.logs.lines().filter((line) => line.msg === 'malformed request refused' || line.msg === 'CONNECT refused')).toEqual([])

    const quiet = await startGateway(testConfig(await refusingOrigin(), { log: { access: false } }))
    const result = await rawExchange(quiet.url, 'GET /v4/x HTTP/1.1\r\nHost: a\r\nBroken header line\r\n\r\n')
    expect(result.response?.status).toBe(400)
    expect((await send(quiet.adminUrl, '/metrics')).text).toMatch(/v4gw_requests_total\{[^}]*code="400"[^}]*\} 1/)
    expect(quiet.logs.lines().filter((line) => line.msg === 'request')).toEqual([])
  })
})

describe('log.access: false (SPEC 17)', () => {
  it('writes no access line, and still logs an upstream failure at the default level (errors are still logged)', async () => {
    const gateway = await startGateway(testConfig(await refusingOrigin(), { log: { access: false } }))
    const answer = await send(gateway.url, '/v1/headless/runs', { headers: AUTH, json: { input: 1 } })
    expect(answer.status).toBe(502)
    const requestId = answer.headers['x-request-id']
    await until(() => gateway.logs.lines().some((one) => one.msg === 'upstream failure' && one.requestId === requestId))
    expect(gateway.logs.lines().find((one) => one.msg === 'upstream failure' && one.requestId === requestId)).toMatchObject({ level: 40, error: 'UPSTREAM_UNAVAILABLE', cause: 'refused', status: 502, route: 'POST /v1/headless/runs' })
    expect(gateway.logs.lines().filter((one) => one.msg === 'request')).toEqual([])
    // One line for the one failure.
    expect(gateway.logs.lines().filter((one) => one.msg === 'upstream failure')).toHaveLength(1)
  })

  it('writes no access line, and still writes the gateway’s own lines', async () => {
    const gateway = await startGateway(testConfig(await refusingOrigin(), { log: { level: 'debug', access: false } }))
    const answer = await send(gateway.url, '/v1/headless/runs', { headers: AUTH, json: { input: 1 } })
    expect(answer.status).toBe(502)
    const requestId = answer.headers['x-request-id']
    await until(() => gateway.logs.lines().some((one) => one.msg === 'upstream failure' && one.requestId === requestId))
    expect(gateway.logs.lines().filter((one) => one.msg === 'request')).toEqual([])
  })
})

describe('an upstream failure with log.access false is still logged (SPEC 17: errors are still logged)', () => {
  it('logs a native stream whose upstream broke off after its head, with log.access false at debug', async () => {
    // The upstream sends its head and part of the body, then resets: the client has its 200 already.
    const upstream = await startFaultUpstream((exchange) => {
      exchange.response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' })
      exchange.response.write('{"partial":', () => resetConnection(exchange))
    })
    const gateway = await startGateway(testConfig(upstream.url, { log: { level: 'debug', access: false } }))
    const answer = await rawExchange(gateway.url, `POST /v4/execute HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer demo-token-alice\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`)
    expect(answer.response?.status).toBe(200)
    await until(() => gateway.logs.lines().some((one) => one.msg === 'upstream failure' && one.level === 40))
    expect(gateway.logs.lines().find((one) => one.msg === 'upstream failure' && one.level === 40)).toMatchObject({ error: 'UPSTREAM_BAD_RESPONSE', cause: 'bad_response', path: '/v4/execute' })
  })
})

describe('the access line and the log level (SPEC 9, 17)', () => {
  it('writes none above info, and writes one again once a reload brings the level down to info', async () => {
    const upstream = await refusingOrigin()
    const gateway = await startGateway(testConfig(upstream, { log: { level: 'warn' } }))
    const quiet = await send(gateway.url, '/v1/headless/runs', { headers: AUTH, json: { input: 1 } })
    expect(quiet.status).toBe(502)
    await gateway.gateway.applyConfig(deepFreeze(configSchema.parse(testConfig(upstream, { log: { level: 'info' } }))))
    const logged = await send(gateway.url, '/v1/headless/runs', { headers: AUTH, json: { input: 1 } })
    await accessLineOf(gateway, logged)
    const accessLines = gateway.logs.lines().filter((one) => one.msg === 'request')
    expect(accessLines.map((one) => one.requestId)).toEqual([logged.headers['x-request-id']])
  })
})

describe('log.access across a reload (SPEC 17: requests under way finish under the config they started with)', () => {
  it.each([
    [true, false],
    [false, true]
  ])('writes a request’s line as its own config said (log.access %s), though a reload set %s while it ran', async (before, after) => {
    const upstream = await startFaultUpstream(() => {})
    const config = (access: boolean): Record<string, unknown> => testConfig(upstream.url, { log: { access } })
    const gateway = await startGateway(config(before))
    const held = send(gateway.url, '/v4/execute', { headers: { ...AUTH, 'x-request-id': 'started-before-reload' }, json: { input: 1 } })
    const exchange = await upstream.nextExchange()
    await gateway.gateway.applyConfig(deepFreeze(configSchema.parse(config(after))))
    upstream.setHandler((next) => answerJson(next, 200, { output: 2 }))
    answerJson(exchange, 200, { output: 1 })
    expect((await held).status).toBe(200)
    const next = await send(gateway.url, '/v4/execute', { headers: { ...AUTH, 'x-request-id': 'started-after-reload' }, json: { input: 2 } })
    expect(next.status).toBe(200)
    const logged = after ? await accessLineOf(gateway, next, 'started-after-reload') : await accessLineOf(gateway, next, 'started-before-reload')
    expect(logged).toBeDefined()
    const ids = gateway.logs.lines().filter((one) => one.msg === 'request').map((one) => one.requestId)
    expect(ids).toEqual([before ? 'started-before-reload' : 'started-after-reload'])
  })
})

describe('the access line’s clientId when the credential comes first and presents no token (SPEC 12)', () => {
  const { gw } = useSimulatorGateway((simUrl) => ({ tenants: { acme: { upstream: { staging: simUrl }, clients: { key: ['credential', 'header:x-client-id'] } } } }))

  it.each([
    ['an empty X-Api-Key', ['X-Api-Key: ']],
    ['an Authorization scheme with no token', ['Authorization: Bearer ']]
  ])('is the next source’s id for %s, and anonymous without one, never the hash of nothing', async (_name, credentialLines) => {
    const body = JSON.stringify({ input: 1 })
    const ids: unknown[] = []
    for (const extra of [['x-client-id: batch-7'], []]) {
      const { 'x-request-id': requestId } = ownRequestId()
      const lines = [...credentialLines, ...extra, `x-request-id: ${requestId}`]
      const request = `POST /v1/headless/runs HTTP/1.1\r\nHost: gateway.test\r\n${lines.join('\r\n')}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`
      expect((await rawExchange(gw.url, request, { timeoutMs: 3_000 })).response?.status).toBe(401)
      ids.push((await accessLineOf(gw, { headers: {} } as Answer, requestId)).clientId)
    }
    expect(ids).toEqual(['hdr:batch-7', 'anonymous'])
  })
})

describe('the access line’s clientId (SPEC 12, 17)', () => {
  const adminToken = 'admin-token-for-client-ids-0123456789'
  const { gw } = useSimulatorGateway((simUrl) => ({ admin: { token: adminToken }, tenants: { acme: { upstream: { staging: simUrl }, clients: { key: ['header:x-client-id', 'credential'] } } } }))
  const fingerprintOf = (token: string): string => `fp:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`

  it('is the header id before the credential, the credential’s fp: id without the header, and never the credential', async () => {
    const byHeader = await send(gw.url, '/v1/headless/runs', { headers: { ...AUTH, 'x-client-id': 'billing-batch.7' }, json: { input: 1 } })
    expect(byHeader.status).toBe(200)
    expect(await accessLineOf(gw, byHeader)).toMatchObject({ class: 'legacy', clientId: 'hdr:billing-batch.7' })
    const byCredential = await send(gw.url, '/v1/headless/runs', { headers: AUTH, json: { input: 1 } })
    expect(await accessLineOf(gw, byCredential)).toMatchObject({ clientId: fingerprintOf('demo-token-alice') })
    expect(gw.logs.text()).not.toContain('demo-token-alice')
  })

  it('is the id `v4gw fingerprint --header` prints, and explain shows, for a header value sent as UTF-8', async () => {
    const value = 'caf\u00e9 \u00fcber-batch'
    const body = JSON.stringify({ input: 1 })
    const request = Buffer.from(
      `POST /v1/headless/runs HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: ${AUTH.authorization}\r\nx-client-id: ${value}\r\nx-request-id: utf8-client-id\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      'utf8'
    )
    const answer = await rawExchange(gw.url, request, { timeoutMs: 3_000 })
    expect(answer.response?.status).toBe(200)
    const printed = spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'fingerprint', '--header'], { input: `${value}\n`, encoding: 'utf8', timeout: 10_000 })
    expect(printed.stdout).toMatch(/^hdr#[0-9a-f]{16}\n$/)
    await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.requestId === 'utf8-client-id'))
    expect(gw.logs.lines().find((line) => line.msg === 'request' && line.requestId === 'utf8-client-id')).toMatchObject({ clientId: printed.stdout.trim() })
    // explain takes the header as text, and plans the request a client sending it as UTF-8 makes.
    const explained = await send(gw.adminUrl, '/admin/explain', {
      headers: { authorization: `Bearer ${adminToken}` },
      json: { method: 'POST', path: '/v1/headless/runs', headers: { ...AUTH, 'x-client-id': value }, body: { input: 1 } }
    })
    expect(explained.json.clientId).toBe(printed.stdout.trim())
  })

  it('is the fp: id `v4gw fingerprint` prints for a credential header sent as UTF-8', async () => {
    const token = 't\u00f6k\u00e9n-utf8-1'
    const body = JSON.stringify({ input: 1 })
    const request = Buffer.from(
      `POST /v1/headless/runs HTTP/1.1\r\nHost: gateway.test\r\nX-Api-Key: ${token}\r\nx-request-id: utf8-credential-id\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      'utf8'
    )
    // The simulator knows no such token: refused, and its line still names the client.
    expect((await rawExchange(gw.url, request, { timeoutMs: 3_000 })).response?.status).toBe(401)
    const printed = spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'fingerprint'], { input: `${token}\n`, encoding: 'utf8', timeout: 10_000 })
    expect(printed.stdout).toBe(`${fingerprintOf(token)}\n`)
    await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.requestId === 'utf8-credential-id'))
    expect(gw.logs.lines().find((line) => line.msg === 'request' && line.requestId === 'utf8-credential-id')).toMatchObject({ clientId: printed.stdout.trim() })
  })

  it('is anonymous on a legacy request with neither, and absent from a native line', async () => {
    const anonymous = await send(gw.url, '/v1/headless/runs', { json: { input: 1 } })
    expect(anonymous.status).toBe(401)
    expect(await accessLineOf(gw, anonymous)).toMatchObject({ clientId: 'anonymous', error: 'AUTH_INVALID' })
    const id = ownRequestId()
    const native = await send(gw.url, '/v4/execute', { headers: { ...AUTH, ...id, 'x-client-id': 'billing-batch.7' }, json: { input: 'native' } })
    const line = await accessLineOf(gw, native, id['x-request-id'])
    expect(line.class).toBe('native')
    expect(line).not.toHaveProperty('clientId')
  })
})
