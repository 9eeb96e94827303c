import { randomUUID } from 'node:crypto'
import { describe, it, expect, beforeAll } from 'vitest'
import { LEGACY_V1_ROUTES } from '../../src/config/schema.js'
import { send, type Answer, type SendOptions } from '../helpers/http.js'
import { rawExchange } from '../helpers/raw-http.js'
import { refusingOrigin } from '../helpers/fault-upstream.js'
import { startGateway, testConfig, useGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { until } from '../helpers/until.js'

// SPEC 9 and STYLE "Tests": secrets planted in every credential position never reach a log
// line or an error body, whatever the request turns into.

const secret = (label: string): string => `${label}-${randomUUID()}`
const serviceKey = (label: string): string => `key_secret_${label}_${randomUUID().replaceAll('-', '')}`
const serviceAccountId = (label: string): string => `sa_secret_${label}_${randomUUID().replaceAll('-', '')}`

/** Distinct values for every header a credential may hide in, none of them a source of the others. */
function plantedHeaders(label: string): Record<string, string> {
  return {
    authorization: `Bearer ${secret(`secret-authz-${label}`)}`,
    'x-session-token': secret(`secret-xst-${label}`),
    'x-api-key': secret(`secret-xak-${label}`),
    'x-service-api-key': serviceKey(label),
    cookie: `sid=${secret(`secret-cookie-${label}`)}; theme=dark`,
    'proxy-authorization': `Basic ${secret(`secret-proxyauth-${label}`)}`
  }
}

function without(headers: Record<string, string>, ...names: string[]): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !names.includes(name)))
}

/** The bare secret values inside planted headers (scheme and cookie name stripped). */
function secretsOf(headers: Record<string, string>, query: string | null = null): string[] {
  const values = Object.values(headers).flatMap((value) => value.split(/[ ;=]+/)).filter((part) => /secret/.test(part))
  return query === null ? values : [...values, query]
}

interface Scenario {
  name: string
  /** The gateway it runs against. */
  target: 'main' | 'down'
  path: string
  options: SendOptions
  expectedStatus: number
  /** Every credential value planted: none may appear in a log line, an error body, metrics or an explanation. */
  secrets: string[]
  /** Values in the body: never logged, but carried upstream (and echoed back by the simulator) by design. */
  bodySecrets?: string[]
}

// Session tokens and a service key the simulator knows, so those calls really succeed.
const EXECUTE_TOKEN = secret('secret-authz-execute')
const SESSION_TOKEN = secret('secret-xst-session')
const NATIVE_TOKEN = secret('secret-authz-native')
const PROXY_KEY = serviceKey('proxy')
const DOWN_TOKEN = secret('secret-authz-down')
const COOKIE = (label: string): string => `sid=${secret(`secret-cookie-${label}`)}`
const PROXY_AUTH = (label: string): string => `Basic ${secret(`secret-proxyauth-${label}`)}`

function scenarios(): Scenario[] {
  const list: Scenario[] = []
  {
    const headers = { authorization: `Bearer ${EXECUTE_TOKEN}`, 'x-session-token': EXECUTE_TOKEN, cookie: COOKIE('execute'), 'proxy-authorization': PROXY_AUTH('execute') }
    const bodySecret = secret('secret-body-execute')
    list.push({
      name: 'an execute call', target: 'main', path: `/v1/headless/runs?token=${EXECUTE_TOKEN}`, expectedStatus: 200,
      options: { headers, json: { input: { note: 'hello' }, apiSecret: bodySecret } },
      secrets: secretsOf(headers),
      bodySecrets: [bodySecret]
    })
  }
  {
    const headers = { 'x-session-token': SESSION_TOKEN, 'x-api-key': SESSION_TOKEN, cookie: COOKIE('session'), 'proxy-authorization': PROXY_AUTH('session') }
    list.push({
      name: 'a session-execute call', target: 'main', path: `/v1/runs/invoke?token=${SESSION_TOKEN}`, expectedStatus: 200,
      options: { headers, json: { input: 1, stateId: 'state-for-safety-test', state: { policy: 'strict' } } },
      secrets: secretsOf(headers)
    })
  }
  {
    const headers = { 'x-api-key': PROXY_KEY, authorization: `Bearer ${PROXY_KEY}`, cookie: COOKIE('proxy'), 'proxy-authorization': PROXY_AUTH('proxy') }
    list.push({
      name: 'a proxy route', target: 'main', path: `/v1/policies?token=${PROXY_KEY}&limit=2`, expectedStatus: 200,
      options: { headers }, secrets: secretsOf(headers)
    })
  }
  {
    // A key_* in the body of a proxy route is streamed upstream as sent (SPEC 4: streamed like
    // native traffic), and logged nowhere (SPEC 9).
    const headers = { 'x-api-key': PROXY_KEY, cookie: COOKIE('proxy-body') }
    const bodyKey = secret('key_secret_in_proxy_body')
    list.push({
      name: 'a proxy route with a key_* in its body', target: 'main', path: '/v1/policies', expectedStatus: 201,
      options: { headers, json: { name: 'from-a-legacy-client', serviceKey: bodyKey } },
      secrets: secretsOf(headers),
      bodySecrets: [bodyKey]
    })
  }
  {
    // Native traffic is not rewritten (SPEC 7): every position may hold a different value.
    const headers = { ...without(plantedHeaders('native'), 'x-service-api-key'), authorization: `Bearer ${NATIVE_TOKEN}` }
    const query = secret('secret-query-native')
    list.push({
      name: 'a native /v4 call', target: 'main', path: `/v4/execute?token=${query}`, expectedStatus: 200,
      options: { headers, json: { input: 1 } }, secrets: secretsOf(headers, query)
    })
  }
  {
    const headers = plantedHeaders('conflict')
    const query = secret('secret-query-conflict')
    list.push({
      name: 'a conflicting-credentials call', target: 'main', path: `/v1/headless/runs?token=${query}`, expectedStatus: 400,
      options: { headers, json: { input: 1 } }, secrets: secretsOf(headers, query)
    })
  }
  {
    const malformed = secret('secret-malformed')
    const headers = { authorization: `Bearer ${malformed} trailing-part`, cookie: COOKIE('malformed'), 'proxy-authorization': PROXY_AUTH('malformed') }
    list.push({
      name: 'a malformed-credential call', target: 'main', path: '/v1/headless/runs', expectedStatus: 401,
      options: { headers, json: { input: 1 } }, secrets: [...secretsOf(headers), malformed]
    })
  }
  {
    const key = serviceKey('runtime')
    const headers = { 'x-service-api-key': key, cookie: COOKIE('runtime-key') }
    list.push({
      name: 'a key_* on a runtime route', target: 'main', path: '/v1/headless/runs', expectedStatus: 401,
      options: { headers, json: { input: 1 } }, secrets: secretsOf(headers)
    })
  }
  {
    const id = serviceAccountId('runtime')
    const headers = { 'x-api-key': id, cookie: COOKIE('sa') }
    list.push({
      name: 'an sa_* id on a runtime route', target: 'main', path: `/v1/headless/runs?token=${id}`, expectedStatus: 401,
      options: { headers, json: { input: 1 } }, secrets: secretsOf(headers)
    })
  }
  {
    const headers = plantedHeaders('blocked')
    const query = secret('secret-query-blocked')
    list.push({
      name: 'a blocked path', target: 'main', path: `/internal/users?token=${query}`, expectedStatus: 403,
      options: { headers }, secrets: secretsOf(headers, query)
    })
  }
  {
    const headers = plantedHeaders('unknown')
    const query = secret('secret-query-unknown')
    list.push({
      name: 'an unknown route', target: 'main', path: `/v2/anything?token=${query}`, expectedStatus: 404,
      options: { headers }, secrets: secretsOf(headers, query)
    })
  }
  {
    const headers = { authorization: `Bearer ${DOWN_TOKEN}`, cookie: COOKIE('down-legacy'), 'proxy-authorization': PROXY_AUTH('down-legacy') }
    list.push({
      name: 'an upstream-unavailable legacy call', target: 'down', path: `/v1/headless/runs?token=${DOWN_TOKEN}`, expectedStatus: 502,
      options: { headers, json: { input: 1 } }, secrets: secretsOf(headers)
    })
  }
  {
    const headers = plantedHeaders('down-native')
    const query = secret('secret-query-down-native')
    list.push({
      name: 'an upstream-unavailable native call', target: 'down', path: `/v4/execute?token=${query}`, expectedStatus: 502,
      options: { headers, json: { input: 1 } }, secrets: secretsOf(headers, query)
    })
  }
  {
    const headers = without(plantedHeaders('down-proxy'), 'x-session-token', 'x-api-key', 'x-service-api-key')
    list.push({
      name: 'an upstream-unavailable proxy call', target: 'down', path: '/v1/policies', expectedStatus: 502,
      options: { headers }, secrets: secretsOf(headers)
    })
  }
  return list
}

const SCENARIOS = scenarios()
const ALL_SECRETS = SCENARIOS.flatMap((scenario) => scenario.secrets)
const ALL_PLANTED = SCENARIOS.flatMap((scenario) => [...scenario.secrets, ...(scenario.bodySecrets ?? [])])

function gatewayConfig(upstreamUrl: string): Record<string, unknown> {
  return testConfig(upstreamUrl, {
    // Every line a gateway could write, not just the access log.
    log: { level: 'trace' },
    credentials: { queryParam: 'token' },
    internalAdmin: { pathPrefixes: ['/internal'] },
    tenants: {
      acme: {
        upstream: { staging: upstreamUrl },
        legacy: {
          routes: [
            ...LEGACY_V1_ROUTES,
            { method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' },
            { method: 'POST', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }
          ]
        }
      }
    }
  })
}

async function waitForAccessLines(gw: StartedGateway, count: number): Promise<void> {
  const deadline = Date.now() + 2_000
  while (gw.logs.lines().filter((line) => line.msg === 'request').length < count && Date.now() < deadline) {
    await new Promise((resolve) => setImmediate(resolve))
  }
}

describe('secret safety (SPEC 9)', () => {
  const answers = new Map<string, Answer>()
  const identity = { subject: 'user_safety', roles: ['admin'] }
  const sim = useSimulator({
    sessionTokens: { [EXECUTE_TOKEN]: identity, [SESSION_TOKEN]: identity, [NATIVE_TOKEN]: identity },
    serviceKeys: { [PROXY_KEY]: { subject: 'sa_safety', roles: ['admin'] } }
  })
  const gw = useGateway(() => gatewayConfig(sim.url))
  const down = useGateway(async () => gatewayConfig(await refusingOrigin()))

  beforeAll(async () => {
    for (const scenario of SCENARIOS) {
      const via = scenario.target === 'main' ? gw : down
      answers.set(scenario.name, await send(via.url, scenario.path, scenario.options))
    }
    await waitForAccessLines(gw, SCENARIOS.filter((scenario) => scenario.target === 'main').length)
    await waitForAccessLines(down, SCENARIOS.filter((scenario) => scenario.target === 'down').length)
  })

  function allLogBytes(): string {
    return gw.logs.text() + down.logs.text()
  }

  it.each(SCENARIOS)('answers $name with status $expectedStatus (the planted request really ran)', (scenario) => {
    expect(answers.get(scenario.name)?.status).toBe(scenario.expectedStatus)
  })

  it.each(SCENARIOS)('writes none of the secrets of $name to any log line', (scenario) => {
    const log = allLogBytes()
    expect(log.length).toBeGreaterThan(0)
    for (const value of [...scenario.secrets, ...(scenario.bodySecrets ?? [])]) expect(log).not.toContain(value)
  })

  it.each(SCENARIOS.filter((scenario) => scenario.expectedStatus >= 400))('returns none of the planted secrets in the error answer to $name', (scenario) => {
    const answer = answers.get(scenario.name) as Answer
    const everything = answer.text + JSON.stringify(answer.headers)
    for (const value of ALL_PLANTED) expect(everything).not.toContain(value)
  })

  it('returns no credential in the response headers of a successful call', () => {
    for (const scenario of SCENARIOS.filter((entry) => entry.expectedStatus < 400)) {
      const headers = JSON.stringify(answers.get(scenario.name)?.headers)
      for (const value of scenario.secrets) expect(headers).not.toContain(value)
    }
  })

  it('writes one access line per request, each with a request id and no header or query values', () => {
    const lines = [...gw.logs.lines(), ...down.logs.lines()].filter((line) => line.msg === 'request')
    expect(lines).toHaveLength(SCENARIOS.length)
    for (const line of lines) {
      expect(typeof line.requestId).toBe('string')
      expect(JSON.stringify(line)).not.toMatch(/token=|secret/i)
    }
  })

  it('logs no authorization value: no bearer token, no key_*, no sa_* anywhere', () => {
    const log = allLogBytes()
    expect(log).not.toMatch(/bearer\s/i)
    expect(log).not.toMatch(/basic\s/i)
    expect(log).not.toContain('key_secret_')
    expect(log).not.toContain('sa_secret_')
  })

  it('exposes none of the planted secrets in /metrics', async () => {
    const scraped = (await send(gw.adminUrl, '/metrics')).text + (await send(down.adminUrl, '/metrics')).text
    expect(scraped).toContain('v4gw_requests_total')
    for (const value of ALL_PLANTED) expect(scraped).not.toContain(value)
  })

  it('exposes none of the planted secrets in the migration report', async () => {
    const report = await send(gw.adminUrl, '/admin/migration')
    expect(report.status).toBe(200)
    expect(report.text).toContain('/v1/headless/runs')
    for (const value of ALL_PLANTED) expect(report.text).not.toContain(value)
  })

  it.each(SCENARIOS)('explains $name on /admin/explain with its credentials redacted', async (scenario) => {
    const via = scenario.target === 'main' ? gw : down
    const method = scenario.options.json === undefined ? 'GET' : 'POST'
    const explained = await send(via.adminUrl, '/admin/explain', {
      json: { method, path: scenario.path, headers: scenario.options.headers, body: scenario.options.json }
    })
    expect(explained.status).toBe(200)
    for (const value of scenario.secrets) expect(explained.text).not.toContain(value)
  })

  it('writes the upstream-unavailable errors (debug lines, with their stacks) without their request credentials', () => {
    const errorLines = down.logs.lines().filter((line) => line.msg === 'upstream failure')
    expect(errorLines.length).toBeGreaterThan(0)
    for (const line of errorLines) {
      const text = JSON.stringify(line)
      for (const value of ALL_SECRETS) expect(text).not.toContain(value)
    }
  })
})

describe('secret safety of requests the admin listener cannot parse (SPEC 9)', () => {
  it('writes no byte of a malformed admin request, its Authorization included, to the log at trace level', async () => {
    const adminToken = secret('secret-admin-token')
    const via = await startGateway(testConfig(await refusingOrigin(), { log: { level: 'trace' }, admin: { token: adminToken } }))
    // A header line without a colon: Node's parser refuses it and attaches the raw bytes to the error.
    const result = await rawExchange(via.adminUrl, `GET /admin/sessions HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${adminToken}\r\nBroken header line\r\n\r\n`)
    expect(result.response?.status).toBe(400)
    // The admin listener answers it as the traffic listener does, logging the error code only.
    await until(() => via.logs.lines().some((line) => line.msg === 'malformed request refused'))
    // Bytes are logged as a Buffer's JSON, a list of numbers: decode them before looking.
    const decoded = via.logs.lines().map((line) => JSON.stringify(line, (_key, value: unknown) =>
      (value as { type?: string })?.type === 'Buffer' ? Buffer.from((value as { data: number[] }).data).toString('latin1') : value))
    expect(decoded.join('\n')).not.toContain(adminToken)
  })
})
