import { hash, randomUUID } from 'node:crypto'
import type { ServerResponse } from 'node:http'
import { beforeAll, describe, expect, it } from 'vitest'
import { LEGACY_V1_ROUTES } from '../../src/config/schema.js'
import { send, type Answer, type SendOptions } from '../helpers/http.js'
import { useOtlpReceiver } from '../helpers/otlp-receiver.js'
import { useRecordingUpstream, type RecordedRequest } from '../helpers/recording-upstream.js'
import { useRedisServer } from '../helpers/redis-server.js'
import { runCli } from '../helpers/spawn-cli.js'
import { testConfig, useGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { until } from '../helpers/until.js'

/**
 * SPEC 5, 9, 13-17 on the paths of part two: credentials planted in every position a legacy
 * client can send one, on requests served by the legacy upstream, by V4 on a canary's allow side,
 * compared in shadow, browned out, gone, and replayed by idempotency on a real redis-server. No
 * planted value may reach a log line, a metric, an admin answer, a report, an exported span, an
 * error body or a Redis key or value. What the upstreams receive is theirs (SPEC 14 streams the
 * client's credentials to the legacy upstream unchanged) and is not looked at.
 */

const planted = (label: string): string => `pl2-${label}-${randomUUID().replaceAll('-', '')}`
const base64 = (text: string): string => Buffer.from(text).toString('base64')
const fp = (credential: string): string => `fp:${hash('sha256', credential, 'hex').slice(0, 16)}`
const HOUR = 3_600_000
const NOW = Date.now()
const iso = (ms: number): string => new Date(ms).toISOString()
const PROXY_ROUTE = { method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }
const ROUTES = [...LEGACY_V1_ROUTES, PROXY_ROUTE]

/**
 * The planted secrets `text` gives away: as written, percent-encoded or base64-encoded, or inside
 * any base64 run of the text once decoded (a Basic credential, a buffer logged as base64).
 */
function leaks(text: string, secrets: readonly string[]): string[] {
  const decoded = (text.match(/[A-Za-z0-9+/_-]{16,}={0,2}/g) ?? []).map((run) => Buffer.from(run, 'base64').toString('latin1')).join('\n')
  return secrets.filter((secret) => [secret, encodeURIComponent(secret), base64(secret)].some((form) => text.includes(form)) || decoded.includes(secret))
}

function json(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(JSON.stringify(body))
}

/** The credential a request carried, as sent, wherever it was: what an echoing backend would copy into its answer. */
function credentialOf(request: RecordedRequest): string {
  const query = new URL(request.url, 'http://upstream').searchParams.get('access_token')
  return String(request.headers.authorization ?? request.headers['x-api-key'] ?? request.headers['x-service-api-key'] ?? query ?? 'none')
}

const legacyAnswer = (request: RecordedRequest) => ({ output: { text: 'done', who: `legacy saw ${credentialOf(request)}` }, effective: { policy: 'p', route: 'r', risk: 'low' }, meta: {} })

/** The legacy backend, which echoes the credential it got into a body value. */
const legacyHandler = (request: RecordedRequest, response: ServerResponse): void => json(response, 200, legacyAnswer(request))

/**
 * The V4 side. A shadow call (SPEC 15: `x-v4gw-shadow: 1`) gets an answer that holds the
 * credential in a body value and as a member name, unless its request id starts with `same`
 * (then the legacy answer: a match). Calls that serve clients get a plain answer, so that what
 * idempotency keeps is the upstream's and holds nothing planted.
 */
function v4Handler(request: RecordedRequest, response: ServerResponse): void {
  if (request.url === '/v4/sessions.start') return json(response, 201, { sessionId: 'ses_planted', defaults: {}, meta: {} })
  if (request.headers['x-v4gw-shadow'] !== '1') return json(response, 200, { output: { text: 'served' }, meta: {} })
  if (String(request.headers['x-request-id']).startsWith('same')) return json(response, 200, legacyAnswer(request))
  const who = credentialOf(request)
  json(response, 200, { ...legacyAnswer(request), output: { text: 'done', who: `v4 saw ${who}`, [who.replace(/^Bearer /, '')]: 'named' } })
}

interface Planted {
  name: string
  path: string
  options: SendOptions
  secrets: string[]
  /** `fp:` ids of the credentials, for a canary's allow or deny list. */
  clientIds: string[]
  status: number
  servedBy: string
  code?: string
}

/**
 * Four requests of one tenant, each with its own secrets: a bearer token on execute, the query
 * credential on session-execute, a `key_*` in x-api-key and a Basic credential on a proxy route;
 * every one with a session cookie. `expect` gives each one's status, served-by and error code.
 */
function plantedSet(tenant: string, side: string, expect: (index: number) => Pick<Planted, 'status' | 'servedBy' | 'code'>): Planted[] {
  const [bearer, query, key, basic] = [planted(`bearer-${side}`), planted(`query-${side}`), `key_${planted(`apikey-${side}`)}`, planted(`basic-${side}`)]
  const basicHeader = `Basic ${base64(`user:${basic}`)}`
  const common = (label: string) => {
    const cookie = planted(`cookie-${side}-${label}`)
    return { cookie, headers: { 'x-tenant-id': tenant, cookie: `session=${cookie}; theme=dark`, 'x-request-id': `${side}-${label}` } }
  }
  const [a, b, c, d] = ['bearer', 'query', 'apikey', 'basic'].map(common) as [ReturnType<typeof common>, ReturnType<typeof common>, ReturnType<typeof common>, ReturnType<typeof common>]
  return [
    { name: `${side}: execute, Bearer`, path: '/v1/headless/runs', options: { headers: { ...a.headers, authorization: `Bearer ${bearer}` }, json: { input: 1 } }, secrets: [bearer, a.cookie], clientIds: [fp(bearer)], ...expect(0) },
    { name: `${side}: session-execute, ?access_token`, path: `/v1/runs/invoke?access_token=${query}&keep=1`, options: { headers: b.headers, json: { input: 1, stateId: `st-${side}` } }, secrets: [query, b.cookie], clientIds: [fp(query)], ...expect(1) },
    { name: `${side}: proxy, x-api-key key_*`, path: '/v1/policies?limit=2', options: { headers: { ...c.headers, 'x-api-key': key } }, secrets: [key, c.cookie], clientIds: [fp(key)], ...expect(2) },
    { name: `${side}: proxy, Basic`, path: '/v1/policies', options: { headers: { ...d.headers, authorization: basicHeader } }, secrets: [basic, basicHeader.slice(6), d.cookie], clientIds: [fp(basicHeader)], ...expect(3) }
  ]
}

/** One request with a credential in every position at once (a conflict the translation would refuse with 400). */
function everywhere(tenant: string, side: string, status: number, code: string): Planted {
  const [bearer, key, query, cookie] = [planted(`all-bearer-${side}`), `key_${planted(`all-apikey-${side}`)}`, planted(`all-query-${side}`), planted(`all-cookie-${side}`)]
  const headers = { 'x-tenant-id': tenant, authorization: `Bearer ${bearer}`, 'x-api-key': key, cookie: `session=${cookie}`, 'x-request-id': `${side}-all` }
  return { name: `${side}: execute, every position`, path: `/v1/headless/runs?access_token=${query}`, options: { headers, json: { input: 1 } }, secrets: [bearer, key, query, cookie], clientIds: [fp(bearer)], status, servedBy: 'gateway', code }
}

const byLegacy = () => ({ status: 200, servedBy: 'legacy' })
const brownout = () => ({ status: 410, servedBy: 'gateway', code: 'LEGACY_BROWNOUT' })
const gone = () => ({ status: 410, servedBy: 'gateway', code: 'LEGACY_GONE' })
const ALLOW = plantedSet('canary', 'canary-allow', (index) => (index === 3 ? { status: 401, servedBy: 'gateway', code: 'AUTH_INVALID' } : { status: 200, servedBy: 'v4' }))
const DENY = plantedSet('canary', 'canary-deny', byLegacy)
const SHADOW_KEY = `key_${planted('shadow-apikey')}`
const STAGED: Planted[] = [
  ...plantedSet('old', 'legacy', byLegacy),
  ...ALLOW,
  ...DENY,
  ...plantedSet('shadowed', 'shadow', byLegacy),
  { name: 'shadow: execute, key_* (a 401 candidate)', path: '/v1/headless/runs', options: { headers: { 'x-tenant-id': 'shadowed', 'x-api-key': SHADOW_KEY }, json: { input: 1 } }, secrets: [SHADOW_KEY], clientIds: [], status: 200, servedBy: 'legacy' },
  ...plantedSet('browned', 'brownout', brownout),
  everywhere('browned', 'brownout', 410, 'LEGACY_BROWNOUT'),
  ...plantedSet('retired', 'gone', gone),
  everywhere('retired', 'gone', 410, 'LEGACY_GONE')
]
const STAGED_SECRETS = STAGED.flatMap((request) => request.secrets)

/** How many requests the registry of `/admin/migration` has counted, over every tenant and route. */
function countedRequests(migration: Answer): number {
  const tenants = Object.values(migration.json?.tenants ?? {}) as { routes: Record<string, { requests: number }> }[]
  return tenants.flatMap((tenant) => Object.values(tenant.routes)).reduce((sum, route) => sum + route.requests, 0)
}

/** Comparisons that have ended with an outcome (`comparisons` counts those started, some of which may still run). */
function shadowComparisons(answer: Answer): number {
  type Counts = { matches: number; mismatches: number; candidateErrors: number; primaryErrors: number }
  const routes = Object.values(answer.json?.tenants ?? {}).flatMap((tenant) => Object.values(tenant as Record<string, Counts>))
  return routes.reduce((sum, route) => sum + route.matches + route.mismatches + route.candidateErrors + route.primaryErrors, 0)
}

async function accessLines(gw: StartedGateway, count: number): Promise<void> {
  await until(() => gw.logs.lines().filter((line) => line.msg === 'request').length >= count)
}

describe('no planted credential leaves the gateway in stages legacy, canary, shadow, brownout and gone (SPEC 13-15, 17)', () => {
  const v4 = useRecordingUpstream(v4Handler)
  const legacy = useRecordingUpstream(legacyHandler)
  const receiver = useOtlpReceiver()
  const gw = useGateway(() => {
    const upstream = { staging: v4.url, legacy: legacy.url }
    const deprecation = { date: iso(NOW - HOUR), brownouts: { windows: [{ start: iso(NOW - HOUR), end: iso(NOW + HOUR) }], minNoticeMs: 0 } }
    return testConfig(v4.url, {
      log: { level: 'trace' },
      credentials: { queryParam: 'access_token' },
      tracing: { enabled: true, sampleRatio: 1, endpoint: receiver.endpoint, batchDelayMs: 20 },
      tenancy: { default: 'old' },
      tenants: {
        old: { upstream, legacy: { routes: ROUTES }, migration: { stage: 'legacy' } },
        canary: { upstream, legacy: { routes: ROUTES }, migration: { stage: 'canary', canary: { percent: 50, allow: ALLOW.flatMap((request) => request.clientIds), deny: DENY.flatMap((request) => request.clientIds) } } },
        shadowed: { upstream, legacy: { routes: ROUTES }, migration: { stage: 'shadow', routes: { 'GET /v1/policies': { stage: 'legacy' } } } },
        browned: { upstream, legacy: { routes: ROUTES, deprecation }, migration: { stage: 'legacy' } },
        retired: { upstream: { staging: v4.url }, legacy: { routes: ROUTES }, migration: { stage: 'native-only' } }
      }
    })
  })
  const answers = new Map<string, Answer>()
  const seen: Record<string, string> = {}

  beforeAll(async () => {
    for (const request of STAGED) answers.set(request.name, await send(gw.url, request.path, request.options))
    await accessLines(gw, STAGED.length)
    // Counted once each answer has gone out; the three comparisons end beside the answers.
    await until(async () => countedRequests(await send(gw.adminUrl, '/admin/migration?clients=10000')) === STAGED.length)
    await until(async () => shadowComparisons(await send(gw.adminUrl, '/admin/shadow')) === 3)
    for (const path of ['/metrics', '/admin/migration?clients=10000', '/admin/shadow', '/admin/sessions']) seen[path] = (await send(gw.adminUrl, path)).text
  })

  it.each(STAGED)('answers "$name" with $status, served by $servedBy (the planted request really ran its stage)', (request) => {
    const answer = answers.get(request.name) as Answer
    expect(answer.status).toBe(request.status)
    expect(answer.headers['x-v4gw-served-by']).toBe(request.servedBy)
    if (request.code !== undefined) expect(answer.json?.error?.code).toBe(request.code)
  })

  it('writes none of the planted credentials to any log line, at trace level', () => {
    const log = gw.logs.text()
    expect(gw.logs.lines().filter((line) => line.msg === 'request')).toHaveLength(STAGED.length)
    expect(leaks(log, STAGED_SECRETS)).toEqual([])
    expect(log).not.toMatch(/bearer\s+pl2|basic\s+[A-Za-z0-9+/]{16}|key_pl2/i)
  })

  it('exposes none of them in /metrics, as a label or anywhere else', () => {
    expect(seen['/metrics']).toContain('v4gw_legacy_deprecation_total{tenant="browned"')
    expect(leaks(seen['/metrics'] as string, STAGED_SECRETS)).toEqual([])
  })

  it('lists the clients in /admin/migration by id only; /admin/shadow and /admin/sessions hold none of them either', () => {
    for (const id of [...ALLOW, ...DENY].flatMap((request) => request.clientIds)) expect(seen['/admin/migration?clients=10000']).toContain(id)
    expect(JSON.parse(seen['/admin/shadow'] as string).tenants.shadowed['POST /v1/headless/runs'].mismatches).toBe(2)
    for (const path of ['/admin/migration?clients=10000', '/admin/shadow', '/admin/sessions']) expect(leaks(seen[path] as string, STAGED_SECRETS), path).toEqual([])
  })

  it('prints none of them in the migration report (md, csv, json)', async () => {
    for (const format of ['md', 'csv', 'json']) {
      const run = await runCli(['report', '--admin', gw.adminUrl, '--format', format])
      expect(run.code, run.stderr).toBe(0)
      expect(run.stdout).toContain(fp(ALLOW[0]?.secrets[0] as string))
      expect(leaks(run.stdout + run.stderr, STAGED_SECRETS), format).toEqual([])
    }
  })

  it('returns none of them in the brownout and gone 410s or any other answer the gateway made itself, body or headers', () => {
    const made = STAGED.filter((request) => request.servedBy === 'gateway')
    expect(made.filter((request) => request.status === 410)).toHaveLength(10)
    for (const request of made) {
      const answer = answers.get(request.name) as Answer
      expect(leaks(answer.text + JSON.stringify(answer.headers), STAGED_SECRETS), request.name).toEqual([])
    }
  })

  // Last: it closes the gateway, so that every span is exported.
  it('exports a SERVER span per request and none of the planted credentials in any exported byte or decoded span', async () => {
    await until(() => receiver.spans.filter((span) => span.kind === 'SERVER').length === STAGED.length)
    await gw.close()
    expect(receiver.spans.filter((span) => span.kind === 'CLIENT' && span.name.startsWith('GET')).length).toBeGreaterThan(0)
    expect(leaks(Buffer.concat(receiver.bodies).toString('latin1'), STAGED_SECRETS)).toEqual([])
    expect(leaks(JSON.stringify(receiver.spans), STAGED_SECRETS)).toEqual([])
  })

  it('writes none of them in the lines of its shutdown either', () => {
    expect(gw.logs.lines().filter((line) => line.msg === 'request')).toHaveLength(STAGED.length)
    expect(leaks(gw.logs.text(), STAGED_SECRETS)).toEqual([])
  })
})

const PREFIX = 'pl2safe:'
const [KEY_TOKEN, QUERY_TOKEN, LONG_TOKEN] = [planted('idem-bearer'), planted('idem-query'), planted('idem-long-bearer')]
const [IDEM_KEY, SF_KEY, LONG_KEY, SPACED_KEY] = [planted('idem-key'), planted('idem-sf-key'), planted('idem-long-key'), planted('idem-spaced-key')]
const [SHADOW_BEARER, SHADOW_QUERY, SHADOW_APIKEY, SAME_BEARER] = [planted('sh-bearer'), planted('sh-query'), `key_${planted('sh-apikey')}`, planted('sh-same-bearer')]
const COOKIE = planted('redis-cookie')

interface Keyed {
  name: string
  path: string
  headers: Record<string, string>
  body: unknown
  status: number
}

const keyed = (name: string, path: string, headers: Record<string, string>, body: unknown, status: number): Keyed => ({ name, path, headers: { cookie: `session=${COOKIE}`, ...headers }, body, status })
const KEYED: Keyed[] = [
  keyed('executed', '/v1/headless/runs', { authorization: `Bearer ${KEY_TOKEN}`, 'idempotency-key': IDEM_KEY }, { input: 1 }, 200),
  keyed('replayed', '/v1/headless/runs', { authorization: `Bearer ${KEY_TOKEN}`, 'idempotency-key': IDEM_KEY }, { input: 1 }, 200),
  keyed('key reused (422)', '/v1/headless/runs', { authorization: `Bearer ${KEY_TOKEN}`, 'idempotency-key': IDEM_KEY }, { input: 2 }, 422),
  keyed('sf-string key, query credential', `/v1/runs/invoke?access_token=${QUERY_TOKEN}`, { 'idempotency-key': `"${SF_KEY}"` }, { input: 1, stateId: 'st-keyed' }, 200),
  keyed('key over 255 chars (400)', '/v1/headless/runs', { authorization: `Bearer ${LONG_TOKEN}`, 'idempotency-key': `${LONG_KEY}${'k'.repeat(255)}` }, { input: 1 }, 400),
  keyed('key with a space (400)', '/v1/headless/runs', { authorization: `Bearer ${LONG_TOKEN}`, 'idempotency-key': `${SPACED_KEY} tail` }, { input: 1 }, 400),
  // Compared in shadow: V4 echoes the credential in a value and a member name; the legacy upstream in a value.
  keyed('shadow mismatch, Bearer', '/v1/headless/runs', { 'x-tenant-id': 'shadowed', authorization: `Bearer ${SHADOW_BEARER}`, 'x-request-id': 'differs-bearer' }, { input: 1 }, 200),
  keyed('shadow mismatch, query credential', `/v1/runs/invoke?access_token=${SHADOW_QUERY}`, { 'x-tenant-id': 'shadowed', 'x-request-id': 'differs-query' }, { input: 1, stateId: 'st-shadow' }, 200),
  keyed('shadow mismatch, key_* (a 401 candidate)', '/v1/headless/runs', { 'x-tenant-id': 'shadowed', 'x-api-key': SHADOW_APIKEY, 'x-request-id': 'differs-apikey' }, { input: 1 }, 200),
  keyed('shadow match, the credential in both answers', '/v1/headless/runs', { 'x-tenant-id': 'shadowed', authorization: `Bearer ${SAME_BEARER}`, 'x-request-id': 'same-bearer' }, { input: 1 }, 200)
]
const KEYED_SECRETS = [KEY_TOKEN, QUERY_TOKEN, LONG_TOKEN, IDEM_KEY, SF_KEY, LONG_KEY, SPACED_KEY, SHADOW_BEARER, SHADOW_QUERY, SHADOW_APIKEY, SAME_BEARER, COOKIE]

describe('no planted credential or idempotency key in Redis, idempotency records and shadow results included (SPEC 12, 15, 16)', () => {
  const redis = useRedisServer()
  const v4 = useRecordingUpstream(v4Handler)
  const legacy = useRecordingUpstream(legacyHandler)
  const receiver = useOtlpReceiver()
  const gw = useGateway(() =>
    testConfig(v4.url, {
      log: { level: 'trace' },
      credentials: { queryParam: 'access_token' },
      tracing: { enabled: true, sampleRatio: 1, endpoint: receiver.endpoint, batchDelayMs: 20 },
      store: { kind: 'redis', redis: { url: redis.url, keyPrefix: PREFIX }, flushMs: 50 },
      tenancy: { default: 'keyed' },
      tenants: {
        keyed: { upstream: { staging: v4.url }, legacy: { idempotency: {} } },
        shadowed: { upstream: { staging: v4.url, legacy: legacy.url }, migration: { stage: 'shadow' } }
      }
    })
  )
  const answers = new Map<string, Answer>()
  const seen: Record<string, string> = {}
  /** Every key under the prefix with its value, by key family (`i:`, `sh:`, `r:`, ...). */
  const families: Record<string, string> = {}

  beforeAll(async () => {
    for (const request of KEYED) answers.set(request.name, await send(gw.url, request.path, { headers: request.headers, json: request.body }))
    await accessLines(gw, KEYED.length)
    await until(async () => shadowComparisons(await send(gw.adminUrl, '/admin/shadow')) === 4)
    for (const path of ['/metrics', '/admin/migration?clients=10000', '/admin/shadow', '/admin/sessions']) seen[path] = (await send(gw.adminUrl, path)).text
    await until(() => receiver.spans.filter((span) => span.kind === 'SERVER').length === KEYED.length)
    // Closing writes the registry's and the shadow results' last counts to Redis and exports the last spans.
    await gw.close()
    const client = redis.client()
    for (const key of await client.keys(`${PREFIX}*`)) {
      const type = await client.type(key)
      let value: unknown
      if (type === 'hash') value = await client.hgetall(key)
      else if (type === 'zset') value = await client.zrange(key, 0, -1, 'WITHSCORES')
      else if (type === 'list') value = await client.lrange(key, 0, -1)
      else if (type === 'set') value = await client.smembers(key)
      else value = (await client.getBuffer(key))?.toString('latin1')
      const family = /^[a-z]+:/.exec(key.slice(PREFIX.length))?.[0] ?? 'other'
      families[family] = `${families[family] ?? ''}${key}\n${JSON.stringify(value)}\n`
    }
  })

  it.each(KEYED)('answers "$name" with $status', (request) => {
    expect(answers.get(request.name)?.status).toBe(request.status)
  })

  it('replays the second keyed call and compares all four shadowed calls, three of them mismatches', () => {
    expect(answers.get('replayed')?.headers['idempotent-replayed']).toBe('true')
    const shadow = JSON.parse(seen['/admin/shadow'] as string).tenants.shadowed
    expect(shadow['POST /v1/headless/runs']).toMatchObject({ matches: 1, mismatches: 2 })
    expect(shadow['POST /v1/runs/invoke']).toMatchObject({ mismatches: 1 })
    expect(shadow['POST /v1/headless/runs'].topPointers.map((entry: { pointer: string }) => entry.pointer)).toEqual(expect.arrayContaining(['/output/who', expect.stringMatching(/^\/output\/~h[0-9a-f]{8}$/)]))
  })

  it('keeps only hashes in the idempotency records (i:): no token, no idempotency key', () => {
    expect(families['i:']?.match(/\n/g)?.length).toBeGreaterThanOrEqual(4)
    expect(leaks(families['i:'] as string, KEYED_SECRETS)).toEqual([])
  })

  it('keeps pointers and counts only in the shadow results (sh:), though both answers held the credential in a value', () => {
    expect(families['sh:']).toContain('differs-bearer')
    expect(leaks(families['sh:'] as string, KEYED_SECRETS)).toEqual([])
  })

  it('holds none of them in any other key or value under the prefix: registry, session map, anything', () => {
    expect(Object.keys(families)).toEqual(expect.arrayContaining(['i:', 'sh:', 'r:']))
    for (const [family, text] of Object.entries(families)) expect(leaks(text, KEYED_SECRETS), family).toEqual([])
  })

  it('returns none of them in the 400 and 422 answers, and writes none to the log, /metrics or the admin answers', () => {
    for (const request of KEYED.filter((entry) => entry.status >= 400)) {
      const answer = answers.get(request.name) as Answer
      expect(leaks(answer.text + JSON.stringify(answer.headers), KEYED_SECRETS), request.name).toEqual([])
    }
    expect(leaks(gw.logs.text(), KEYED_SECRETS)).toEqual([])
    for (const [path, text] of Object.entries(seen)) expect(leaks(text, KEYED_SECRETS), path).toEqual([])
  })

  it('exports none of them in any span byte or decoded span', () => {
    expect(receiver.spans.filter((span) => span.attributes['v4gw.shadow'] === true).length).toBeGreaterThan(0)
    expect(leaks(Buffer.concat(receiver.bodies).toString('latin1'), KEYED_SECRETS)).toEqual([])
    expect(leaks(JSON.stringify(receiver.spans), KEYED_SECRETS)).toEqual([])
  })
})
