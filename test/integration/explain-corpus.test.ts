import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { buildRawRequest, rawExchange, type RawHeader } from '../helpers/raw-http.js'
import { useRecordingUpstream, type RecordedRequest } from '../helpers/recording-upstream.js'
import { useGateway } from '../helpers/start-gateway.js'

/**
 * SPEC 9: explain is faithful. Each request of the corpus is explained through the admin API and
 * then sent to the traffic listener in front of a recording upstream: the calls explain prints
 * are the calls that arrive (method, path, query, body, headers), and a refused request is
 * explained with the error code the live request gets.
 */

const TOKEN = 'tok-alpha-1'
const OTHER_TOKEN = 'tok-beta-2'
const SERVICE_KEY = 'key_live_corpus'
const ACCOUNT_ID = 'sa_robot_7'

interface Case {
  name: string
  method?: string
  path: string
  /** A list sends the header more than once. */
  headers?: Record<string, string | string[]>
  /** The body's bytes, as text. */
  body?: string
  /** The gateway's own error code, for a request it refuses. */
  refused?: string
  /** SPEC 14: the side explain says serves the request (`migration.side`). */
  side?: 'legacy' | 'v4'
  /** SPEC 16: what explain says a keyed request would get from its record (the live request then does it). */
  idempotency?: 'execute' | 'replay' | 'refuse'
}

const json = (value: unknown): string => JSON.stringify(value)
const fingerprint = (token: string): string => `fp:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`
const bearer = { authorization: `Bearer ${TOKEN}` }
const jsonType = { 'content-type': 'application/json' }
const runtime = { ...bearer, ...jsonType }
const keyed = { ...runtime, 'x-tenant-id': 'keyed' }

const CORPUS: Case[] = [
  // SPEC 4 execute, every field, and the tenant's deprecation headers (acme).
  { name: 'execute with input only', path: '/v1/headless/runs', headers: runtime, body: json({ input: 'hello' }) },
  { name: 'execute with policy, route and risk', path: '/v1/headless/runs', headers: runtime, body: json({ input: { q: [1, 2] }, policy: 'p1', route: 'r1', risk: 'low' }) },
  { name: 'execute with a null input', path: '/v1/headless/runs', headers: runtime, body: json({ input: null }) },
  { name: 'execute keeps unknown fields', path: '/v1/headless/runs', headers: runtime, body: json({ input: 1, extra: { deep: true }, trace: 'abc' }) },
  { name: 'execute with a query string', path: '/v1/headless/runs?verbose=1&x=%20y', headers: runtime, body: json({ input: 2 }) },
  { name: 'execute carries the user agent and a given request id', path: '/v1/headless/runs', headers: { ...runtime, 'user-agent': 'legacy-sdk/1.2', 'x-request-id': 'corpus-given-id' }, body: json({ input: 3 }) },
  { name: 'execute with a charset on the content type', path: '/v1/headless/runs', headers: { ...bearer, 'content-type': 'application/json; charset=utf-8' }, body: json({ input: 'ü' }) },
  { name: 'execute with an incoming x-forwarded-for list', path: '/v1/headless/runs', headers: { ...runtime, 'x-forwarded-for': '10.0.0.1' }, body: json({ input: 4 }) },
  // SPEC 5 credential sources.
  { name: 'a Token scheme', path: '/v1/headless/runs', headers: { authorization: `Token ${TOKEN}`, ...jsonType }, body: json({ input: 5 }) },
  { name: 'a bare authorization value', path: '/v1/headless/runs', headers: { authorization: TOKEN, ...jsonType }, body: json({ input: 6 }) },
  { name: 'x-session-token', path: '/v1/headless/runs', headers: { 'x-session-token': TOKEN, ...jsonType }, body: json({ input: 7 }) },
  { name: 'x-api-key holding a session token', path: '/v1/headless/runs', headers: { 'x-api-key': TOKEN, ...jsonType }, body: json({ input: 8 }) },
  { name: 'x-service-api-key holding a session token', path: '/v1/headless/runs', headers: { 'x-service-api-key': TOKEN, ...jsonType }, body: json({ input: 9 }) },
  { name: 'the query credential, removed from the query', path: `/v1/headless/runs?access_token=${TOKEN}&keep=1`, headers: jsonType, body: json({ input: 10 }) },
  { name: 'the same token in two sources', path: '/v1/headless/runs', headers: { ...runtime, 'x-api-key': TOKEN }, body: json({ input: 11 }) },
  // SPEC 4 session-execute and its state-key sources.
  { name: 'session-execute by body stateId with state and risk', path: '/v1/runs/invoke', headers: runtime, body: json({ input: 'a', stateId: 'st-1', state: { policy: 'sp', route: 'sr', risk: 'mid' } }) },
  { name: 'session-execute with a top-level risk over the state', path: '/v1/runs/invoke', headers: runtime, body: json({ input: 'b', stateId: 'st-2', state: { risk: 'low' }, risk: 'high' }) },
  { name: 'session-execute with per-call overrides', path: '/v1/runs/invoke', headers: runtime, body: json({ input: 'c', stateId: 'st-3', policy: 'call-p', route: 'call-r' }) },
  { name: 'session-execute without a state key', path: '/v1/runs/invoke', headers: runtime, body: json({ input: 'd' }) },
  { name: 'session-execute by path parameter', path: '/v1/runs/run-42/invoke', headers: runtime, body: json({ input: 'e', state: { route: 'r' } }) },
  { name: 'session-execute by an encoded path parameter', path: '/v1/runs/run%2042/invoke', headers: runtime, body: json({ input: 'f' }) },
  { name: 'session-execute by header (custom tenant)', path: '/v2/keyed', headers: { ...runtime, 'x-tenant-id': 'custom', 'x-state-key': 'hk-1' }, body: json({ payload: 'g' }) },
  { name: 'session-execute by a body pointer (custom tenant)', path: '/v2/nested', headers: { ...runtime, 'x-tenant-id': 'custom' }, body: json({ payload: 'h', meta: { key: 'nk-1' }, settings: { policy: 'np' } }) },
  { name: 'session-execute by a remapped path parameter (custom tenant)', path: '/v2/sessions/s-9/run', headers: { ...runtime, 'x-tenant-id': 'custom' }, body: json({ payload: 'i', level: 'low' }) },
  // Tenant options: remapped fields, unknownFields drop, production upstream.
  { name: 'remapped fields with unknown ones dropped (custom tenant)', path: '/v2/run', headers: { ...runtime, 'x-tenant-id': 'custom' }, body: json({ payload: { n: 1 }, rules: 'rp', lane: 'rl', level: 'high', dropped: true }) },
  { name: 'a production upstream (prod tenant)', path: '/v1/headless/runs', headers: { ...runtime, 'x-tenant-id': 'prod' }, body: json({ input: 'prod' }) },
  { name: 'a tenant chosen by Host', path: '/v1/headless/runs', headers: { ...runtime, host: 'prod.example' }, body: json({ input: 'by-host' }) },
  // SPEC 4 proxy routes and SPEC 5's proxy credentials.
  { name: 'proxy with a service key', method: 'GET', path: '/v1/policies?page=2', headers: { 'x-tenant-id': 'custom', 'x-api-key': SERVICE_KEY } },
  { name: 'proxy with a session token', method: 'GET', path: '/v1/policies', headers: { 'x-tenant-id': 'custom', 'x-session-token': TOKEN } },
  { name: 'proxy without a credential', method: 'GET', path: '/v1/policies', headers: { 'x-tenant-id': 'custom', accept: 'application/json' } },
  { name: 'proxy with a path parameter and a body', path: '/v1/policies/pol-1', headers: { 'x-tenant-id': 'custom', 'x-service-api-key': SERVICE_KEY, ...jsonType }, body: json({ name: 'p' }) },
  { name: 'proxy with the query credential', method: 'GET', path: `/v1/policies?access_token=${SERVICE_KEY}&a=b`, headers: { 'x-tenant-id': 'custom' } },
  { name: 'proxy with hop-by-hop headers', method: 'GET', path: '/v1/policies', headers: { 'x-tenant-id': 'custom', connection: 'keep-alive, x-hop', 'x-hop': '1', 'x-kept': 'yes', authorization: `Bearer ${TOKEN}` } },
  // Refused: SPEC 5.
  { name: 'no credential', path: '/v1/headless/runs', headers: jsonType, body: json({ input: 1 }), refused: 'AUTH_INVALID' },
  { name: 'a service key on a runtime route', path: '/v1/headless/runs', headers: { 'x-api-key': SERVICE_KEY, ...jsonType }, body: json({ input: 1 }), refused: 'AUTH_INVALID' },
  { name: 'a service-account id', path: '/v1/runs/invoke', headers: { 'x-service-api-key': ACCOUNT_ID, ...jsonType }, body: json({ input: 1 }), refused: 'INVALID_CREDENTIAL_TYPE' },
  { name: 'a service-account id on a proxy route', method: 'GET', path: '/v1/policies', headers: { 'x-tenant-id': 'custom', 'x-api-key': ACCOUNT_ID }, refused: 'INVALID_CREDENTIAL_TYPE' },
  { name: 'two different credentials', path: '/v1/headless/runs', headers: { ...runtime, 'x-api-key': OTHER_TOKEN }, body: json({ input: 1 }), refused: 'CREDENTIALS_CONFLICT' },
  { name: 'two copies of one credential header that differ', path: '/v1/headless/runs', headers: { 'x-session-token': [TOKEN, OTHER_TOKEN], ...jsonType }, body: json({ input: 1 }), refused: 'CREDENTIALS_CONFLICT' },
  { name: 'a credential with whitespace', path: '/v1/headless/runs', headers: { 'x-session-token': 'tok with space', ...jsonType }, body: json({ input: 1 }), refused: 'AUTH_INVALID' },
  // Refused: SPEC 4 bodies.
  { name: 'a text/plain body', path: '/v1/headless/runs', headers: { ...bearer, 'content-type': 'text/plain' }, body: 'input=1', refused: 'UNSUPPORTED_MEDIA_TYPE' },
  { name: 'a gzip-coded body', path: '/v1/headless/runs', headers: { ...runtime, 'content-encoding': 'gzip' }, body: json({ input: 1 }), refused: 'UNSUPPORTED_MEDIA_TYPE' },
  { name: 'a body that is not JSON', path: '/v1/headless/runs', headers: runtime, body: '{"input": ', refused: 'INVALID_REQUEST' },
  { name: 'an array body', path: '/v1/headless/runs', headers: runtime, body: json([1, 2]), refused: 'INVALID_REQUEST' },
  { name: 'a body without input', path: '/v1/headless/runs', headers: runtime, body: json({ policy: 'p' }), refused: 'INVALID_REQUEST' },
  { name: 'a policy that is not a string', path: '/v1/headless/runs', headers: runtime, body: json({ input: 1, policy: 7 }), refused: 'INVALID_REQUEST' },
  { name: 'a state that is not an object', path: '/v1/runs/invoke', headers: runtime, body: json({ input: 1, state: 'x' }), refused: 'INVALID_REQUEST' },
  { name: 'a stateId over 256 characters', path: '/v1/runs/invoke', headers: runtime, body: json({ input: 1, stateId: 'x'.repeat(257) }), refused: 'INVALID_REQUEST' },
  { name: 'a body state key that is an object (custom tenant)', path: '/v2/nested', headers: { ...runtime, 'x-tenant-id': 'custom' }, body: json({ payload: 1, meta: { key: { a: 1 } } }), refused: 'INVALID_REQUEST' },
  { name: 'a body nested too deeply to send', path: '/v1/headless/runs', headers: runtime, body: `{"input":${'['.repeat(20_000)}${']'.repeat(20_000)}}`, refused: 'INVALID_REQUEST' },
  { name: 'a body over limits.bodyBytes', path: '/v1/headless/runs', headers: runtime, body: json({ input: 'x'.repeat(70_000) }), refused: 'PAYLOAD_TOO_LARGE' },
  { name: 'an empty body', path: '/v1/headless/runs', headers: runtime, body: '', refused: 'INVALID_REQUEST' },
  // Refused: SPEC 2 and 3.
  { name: 'an unknown tenant', path: '/v1/headless/runs', headers: { ...runtime, 'x-tenant-id': 'nobody' }, body: json({ input: 1 }), refused: 'TENANT_UNKNOWN' },
  { name: 'a proxy rewrite into a blocked prefix', path: '/v1/areas/internal', headers: { 'x-tenant-id': 'custom', ...runtime }, body: json({}), refused: 'FORBIDDEN' },
  { name: 'a dot segment', path: '/v1/runs/../headless/runs', headers: runtime, body: json({ input: 1 }), refused: 'INVALID_REQUEST' },
  { name: 'a path no route matches', path: '/v1/headless/runz', headers: runtime, body: json({ input: 1 }), refused: 'ROUTE_NOT_FOUND' },
  { name: 'two Host headers', path: '/v1/headless/runs', headers: { ...runtime, host: ['a.example', 'b.example'] }, body: json({ input: 1 }), refused: 'INVALID_REQUEST' },
  { name: 'two Host headers on a staged tenant', path: '/v1/headless/runs', headers: { ...runtime, 'x-tenant-id': 'old', host: ['a.example', 'b.example'] }, body: json({ input: 1 }), refused: 'INVALID_REQUEST' },
  // SPEC 16 (keyed tenant): explain looks the key's record up, read only, in order.
  { name: 'a keyed execute whose key holds nothing: executed', path: '/v1/headless/runs', headers: { ...keyed, 'idempotency-key': 'corpus-1' }, body: json({ input: 'once' }), idempotency: 'execute' },
  { name: 'the same keyed execute again: replayed, nothing sent', path: '/v1/headless/runs', headers: { ...keyed, 'idempotency-key': 'corpus-1' }, body: json({ input: 'once' }), idempotency: 'replay' },
  { name: 'the key again with another body', path: '/v1/headless/runs', headers: { ...keyed, 'idempotency-key': 'corpus-1' }, body: json({ input: 'other' }), refused: 'IDEMPOTENCY_KEY_REUSED', idempotency: 'refuse' },
  { name: 'the key as an RFC 8941 string: the same record, replayed', path: '/v1/headless/runs', headers: { ...keyed, 'idempotency-key': '"corpus-1"' }, body: json({ input: 'once' }), idempotency: 'replay' },
  { name: 'a keyed session-execute whose key holds nothing: executed', path: '/v1/runs/invoke', headers: { ...keyed, 'idempotency-key': 'corpus-2' }, body: json({ input: 'j', stateId: 'st-keyed' }), idempotency: 'execute' },
  { name: 'the keyed tenant without a key: served as before', path: '/v1/headless/runs', headers: keyed, body: json({ input: 'no key' }) },
  { name: 'a key that is not visible ASCII', path: '/v1/headless/runs', headers: { ...keyed, 'idempotency-key': 'has space' }, body: json({ input: 1 }), refused: 'INVALID_REQUEST' },
  // SPEC 14 (staged tenants): the side that serves each request, and its calls.
  { name: 'stage legacy: streamed to the legacy upstream as sent', path: '/v1/headless/runs?x=1', headers: { ...runtime, 'x-tenant-id': 'old' }, body: json({ input: 1 }), side: 'legacy' },
  { name: 'stage legacy: a service key and a text body, refused by nothing', path: '/v1/runs/r-1/invoke', headers: { 'x-tenant-id': 'old', 'x-api-key': SERVICE_KEY, 'content-type': 'text/plain' }, body: 'input=1', side: 'legacy' },
  { name: 'stage shadow: served by the legacy upstream', path: '/v1/runs/invoke', headers: { ...runtime, 'x-tenant-id': 'shadowed' }, body: json({ input: 'a', stateId: 'st-sh' }), side: 'legacy' },
  { name: 'stage canary: a client in allow, translated', path: '/v1/runs/invoke', headers: { ...runtime, 'x-tenant-id': 'canaried' }, body: json({ input: 'b', stateId: 'st-can' }), side: 'v4' },
  { name: 'stage canary: a client in deny, to the legacy upstream', path: '/v1/headless/runs', headers: { authorization: `Bearer ${OTHER_TOKEN}`, ...jsonType, 'x-tenant-id': 'canaried' }, body: json({ input: 'c' }), side: 'legacy' },
  { name: 'stage native-only: gone', path: '/v1/headless/runs', headers: { ...runtime, 'x-tenant-id': 'retired' }, body: json({ input: 1 }), refused: 'LEGACY_GONE' },
  { name: 'stage native-only: an exempt client, translated', path: '/v1/headless/runs', headers: { authorization: `Bearer ${OTHER_TOKEN}`, ...jsonType, 'x-tenant-id': 'retired' }, body: json({ input: 1 }), side: 'v4' }
]

const SESSION_ID = '{sessionId}'
// Framing the HTTP client adds to every call, which no plan decides.
const FRAMING = new Set(['host', 'connection', 'content-length', 'transfer-encoding'])

let sessions = 0
const upstream = useRecordingUpstream((recorded, response) => {
  response.writeHead(recorded.url === '/v4/sessions.start' ? 201 : 200, { 'content-type': 'application/json' })
  response.end(recorded.url === '/v4/sessions.start' ? json({ sessionId: `sess-${++sessions}` }) : json({ ok: true }))
})
const gw = useGateway(() => {
  const staging = upstream.url
  const legacyOrigin = staging.replace('127.0.0.1', 'localhost')
  return {
    log: { level: 'silent' },
    limits: { bodyBytes: 65_536 },
    credentials: { queryParam: 'access_token' },
    tenancy: { default: 'acme', hosts: { 'prod.example': 'prod' } },
    internalAdmin: { pathPrefixes: ['/v4/internal'] },
    tenants: {
      acme: {
        upstream: { staging },
        legacy: { deprecation: { date: '2026-01-01T00:00:00Z', sunset: '2027-01-01T00:00:00Z', link: 'https://example.com/migrate' }, responseFields: [{ from: '/ok', to: '/success' }] }
      },
      custom: {
        upstream: { staging },
        legacy: {
          routes: [
            { method: 'POST', path: '/v2/run', action: 'execute' },
            { method: 'POST', path: '/v2/sessions/:sid/run', action: 'session-execute', stateKey: 'param:sid' },
            { method: 'POST', path: '/v2/keyed', action: 'session-execute', stateKey: 'header:x-state-key' },
            { method: 'POST', path: '/v2/nested', action: 'session-execute', stateKey: 'body:/meta/key' },
            { method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' },
            { method: 'POST', path: '/v1/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id' },
            { method: 'POST', path: '/v1/areas/:area', action: 'proxy', rewrite: '/v4/:area' }
          ],
          fields: { input: '/payload', policy: '/rules', route: '/lane', risk: '/level', state: '/settings' },
          unknownFields: 'drop'
        }
      },
      // localhost reaches the same recording upstream under another origin.
      prod: { upstream: { staging, production: staging.replace('127.0.0.1', 'localhost'), target: 'production' } },
      keyed: { upstream: { staging }, legacy: { idempotency: {} } },
      // SPEC 14: localhost reaches the recording upstream as another origin, the legacy one.
      old: { upstream: { staging, legacy: legacyOrigin }, migration: { stage: 'legacy' } },
      // No comparison (SPEC 15 would send the V4 candidate beside): the corpus holds the client's side only.
      shadowed: { upstream: { staging, legacy: legacyOrigin }, migration: { stage: 'shadow', shadow: { percent: 0 } } },
      canaried: { upstream: { staging, legacy: legacyOrigin }, migration: { stage: 'canary', canary: { percent: 0, allow: [fingerprint(TOKEN)], deny: [fingerprint(OTHER_TOKEN)] } } },
      retired: { upstream: { staging }, legacy: { deprecation: { date: '2026-01-01T00:00:00Z', exempt: [{ client: fingerprint(OTHER_TOKEN), until: '2099-01-01T00:00:00Z' }] } }, migration: { stage: 'native-only' } }
    }
  }
})

interface Explained {
  legacyRoute?: string
  servedBy?: string
  migration?: { side: string }
  calls: { method: string; url: string; headers: Record<string, string>; body?: unknown; when?: string }[]
  answer?: { status: number; code: string }
  idempotency?: { would?: string }
}

describe('explain prints what the traffic listener does', () => {
  it('holds a corpus of at least 40 legacy requests, 15 of them refused', () => {
    expect(CORPUS.length).toBeGreaterThanOrEqual(40)
    expect(CORPUS.filter((entry) => entry.refused !== undefined).length).toBeGreaterThanOrEqual(15)
  })

  it.each(CORPUS.map((entry) => [entry.name, entry] as const))('%s', async (_name, entry) => {
    // The same header lines on both sides: Host, the case's (a list is sent as so many lines), a length.
    const headers: Record<string, string | string[]> = { host: new URL(gw.url).host, ...entry.headers }
    if (entry.body !== undefined) headers['content-length'] = String(Buffer.byteLength(entry.body))
    const method = entry.method ?? 'POST'
    const explainedAnswer = await send(gw.adminUrl, '/admin/explain', { json: { method, path: entry.path, headers, rawBody: entry.body } })
    expect(explainedAnswer.status).toBe(200)
    const explained = explainedAnswer.json as Explained
    // Every session-execute starts a session: the live request then makes every call explain prints.
    await send(gw.adminUrl, '/admin/sessions', { method: 'DELETE' })
    upstream.requests.length = 0
    const lines: RawHeader[] = Object.entries(headers).flatMap(([name, value]) => (typeof value === 'string' ? [value] : value).map((one) => [name, one] as const))
    const live = await rawExchange(gw.url, buildRawRequest(`${method} ${entry.path} HTTP/1.1`, [...lines, ['connection', 'close']], entry.body), { timeoutMs: 5_000 })
    const liveAnswer = live.response!
    expect(explained.idempotency?.would).toBe(entry.idempotency)
    expect(liveAnswer.headers['idempotent-replayed']).toBe(entry.idempotency === 'replay' ? 'true' : undefined)

    if (entry.refused !== undefined) {
      expect(liveAnswer.json.error.code).toBe(entry.refused)
      expect(explained.answer).toMatchObject({ status: liveAnswer.status, code: entry.refused })
      // The same decision (SPEC 14): who served it, and the deprecation headers, as the answer says.
      expect(explained.servedBy).toBe(liveAnswer.headers['x-v4gw-served-by'])
      expect(explained.calls).toEqual([])
      expect(upstream.requests).toEqual([])
      return
    }
    expect(explained.answer).toBeUndefined()
    if (entry.side !== undefined) expect(explained.migration?.side).toBe(entry.side)
    expect(liveAnswer.status).toBeLessThan(300)
    expect(upstream.requests.map((request) => request.method)).toEqual(explained.calls.map((call) => call.method))
    const sessionId = explained.calls.length === 2 ? `sess-${sessions}` : undefined
    explained.calls.forEach((call, index) => {
      const arrived = upstream.requests[index] as RecordedRequest
      const url = new URL(sessionId === undefined ? call.url : call.url.replace(SESSION_ID, sessionId))
      expect(`${arrived.method} ${arrived.url}`).toBe(`${call.method} ${url.pathname}${url.search}`)
      expect(arrived.headers.host).toBe(url.host)
      expect(parsedBody(arrived.body)).toEqual(call.body)
      expect(comparableHeaders(arrived.headers)).toEqual(comparableHeaders(call.headers))
      // A request id explain cannot know is shown as a placeholder; the live call has a new one.
      if (call.headers['x-request-id'] === '(a new request id)') expect(arrived.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/)
      else expect(arrived.headers['x-request-id']).toBe(call.headers['x-request-id'])
      // The redacted credential is the one presented, in the form SPEC 5 sends it.
      for (const [name, value] of Object.entries(call.headers)) {
        if (value === 'Bearer [redacted]') expect(arrived.headers[name]).toMatch(/^Bearer tok-/)
        else if (value === '[redacted]') expect(arrived.headers[name]).toMatch(/^(key_|tok-)/)
      }
    })
  })
})

function parsedBody(body: Buffer): unknown {
  if (body.length === 0) return undefined
  // SPEC 14's legacy side streams any body, JSON or not; explain shows one that is not JSON as text.
  try {
    return JSON.parse(body.toString('utf8'))
  } catch {
    return body.toString('utf8')
  }
}

/** A call's headers as both sides can show them: no framing, no client address, credentials as their form. */
function comparableHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const comparable: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || FRAMING.has(name) || name === 'x-forwarded-for' || name === 'x-request-id') continue
    const text = Array.isArray(value) ? value.join(', ') : value
    comparable[name] = /^(authorization|x-service-api-key|x-api-key|x-session-token)$/.test(name) ? (text.startsWith('Bearer ') ? 'Bearer …' : '…') : text
  }
  return comparable
}
