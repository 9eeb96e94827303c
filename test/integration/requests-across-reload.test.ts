import { hash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { configSchema } from '../../src/config/schema.js'
import { deepFreeze } from '../../src/util/deep-freeze.js'
import { answerJson, resetConnection, startFaultUpstream, type FaultExchange } from '../helpers/fault-upstream.js'
import { send } from '../helpers/http.js'
import { useRedisServer } from '../helpers/redis-server.js'
import { startGateway, testConfig } from '../helpers/start-gateway.js'
import { until } from '../helpers/until.js'

/*
 * SPEC 17: "requests under way finish under the config they started with", and the series of
 * tenants and routes a reload removed are removed. A request held at its upstream across a reload
 * shows both: what it counts, and where, follows its own config, not the one in force when it ends.
 */
const DAY = 24 * 3_600_000
const iso = (ms: number): string => new Date(ms).toISOString()
const TOKEN = 'tok-across-reload-1'
const AUTH = { authorization: `Bearer ${TOKEN}` }
const clientIdOf = (token: string): string => `fp:${hash('sha256', token, 'hex').slice(0, 16)}`

describe('a request that spans a reload', () => {
  it('brings back no metric series of a tenant the reload removed', async () => {
    const upstream = await startFaultUpstream(() => {})
    const config = (tenants: string[]) =>
      deepFreeze(configSchema.parse(testConfig(upstream.url, { tenancy: { default: 'stays' }, tenants: Object.fromEntries(tenants.map((name) => [name, { upstream: { staging: upstream.url } }])) })))
    const gw = await startGateway(config(['stays', 'gone']))
    const held = send(gw.url, '/v4/slow', { headers: { ...AUTH, 'x-tenant-id': 'gone' } })
    await until(() => upstream.exchanges.length === 1)
    await gw.gateway.applyConfig(config(['stays']))
    answerJson(upstream.exchanges[0] as FaultExchange, 200, { done: true })
    expect((await held).status).toBe(200)
    // A request of the tenant that stays, counted after the held one ended.
    const after = send(gw.url, '/v4/after', { headers: AUTH })
    await until(() => upstream.exchanges.length === 2)
    answerJson(upstream.exchanges[1] as FaultExchange, 200, { done: true })
    expect((await after).status).toBe(200)
    const metrics = (await send(gw.adminUrl, '/metrics')).text
    expect(metrics).toMatch(/^v4gw_requests_total\{[^}]*tenant="stays"/m)
    expect(metrics).not.toContain('tenant="gone"')
    // What no tenant labels still counts it: both requests are in the latency histogram.
    expect(metrics).toMatch(/^v4gw_request_duration_seconds_count\{class="native"\} 2$/m)
  })

  it('counts no failed sessions.start of a tenant the reload removed while it was under way', async () => {
    const upstream = await startFaultUpstream(() => {})
    const config = (tenants: string[]) =>
      deepFreeze(configSchema.parse(testConfig(upstream.url, { tenancy: { default: 'stays' }, tenants: Object.fromEntries(tenants.map((name) => [name, { upstream: { staging: upstream.url } }])) })))
    const gw = await startGateway(config(['stays', 'gone']))
    const held = send(gw.url, '/v1/runs/r-gone/invoke', { headers: { ...AUTH, 'x-tenant-id': 'gone' }, json: { input: 1 } })
    await until(() => upstream.exchanges.some((exchange) => exchange.url === '/v4/sessions.start'))
    await gw.gateway.applyConfig(config(['stays']))
    resetConnection(upstream.exchanges.find((exchange) => exchange.url === '/v4/sessions.start') as FaultExchange)
    expect((await held).status).toBe(502)
    expect((await send(gw.adminUrl, '/metrics')).text).not.toContain('tenant="gone"')
  })

  it('records its client in the registry as exempt or not by the config it started under', async () => {
    const upstream = await startFaultUpstream(() => {})
    const now = Date.now()
    const config = (exempt: boolean) =>
      deepFreeze(
        configSchema.parse(
          testConfig(upstream.url, {
            tenants: {
              acme: {
                upstream: { staging: upstream.url },
                legacy: { deprecation: { date: iso(now - 30 * DAY), exempt: exempt ? [{ client: clientIdOf(TOKEN), until: iso(now + 10 * DAY) }] : [] } }
              }
            }
          })
        )
      )
    const gw = await startGateway(config(true))
    const held = send(gw.url, '/v1/headless/runs', { headers: AUTH, json: { input: 1 } })
    await until(() => upstream.exchanges.length === 1)
    // The exemption goes while the call is under way: the call was made exempt, and stays so.
    await gw.gateway.applyConfig(config(false))
    answerJson(upstream.exchanges[0] as FaultExchange, 200, { output: 'ran' })
    expect((await held).status).toBe(200)
    const route = (await send(gw.adminUrl, '/admin/migration?tenant=acme&clients=10')).json.tenants.acme.routes['POST /v1/headless/runs']
    expect(route.requests).toBe(1)
    expect(route.lastSeen).not.toBeNull()
    expect(route.lastSeenNonExempt).toBeNull()
  })
})

describe('the client registry across reloads (SPEC 12, store memory)', () => {
  it('keeps the history of a route a reload removed, so that its return shows it and since stays true', async () => {
    const upstream = await startFaultUpstream((exchange) => answerJson(exchange, 200, exchange.url === '/v4/sessions.start' ? { sessionId: 'sess-1' } : { output: 'ran' }))
    const invoke = { method: 'POST', path: '/v1/runs/:runId/invoke', action: 'session-execute', stateKey: 'param:runId' }
    const execute = { method: 'POST', path: '/v1/headless/runs', action: 'execute' }
    const config = (routes: unknown[]) => deepFreeze(configSchema.parse(testConfig(upstream.url, { tenants: { acme: { upstream: { staging: upstream.url }, legacy: { routes } } } })))
    const gw = await startGateway(config([execute, invoke]))
    expect((await send(gw.url, '/v1/runs/r1/invoke', { headers: AUTH, json: { input: 1 } })).status).toBe(200)
    const routeOf = async () => (await send(gw.adminUrl, '/admin/migration?tenant=acme&clients=10')).json.tenants.acme.routes['POST /v1/runs/:runId/invoke']
    await until(async () => (await routeOf())?.requests === 1)
    const before = await routeOf()
    await gw.gateway.applyConfig(config([execute]))
    expect(await routeOf()).toBeUndefined()
    await gw.gateway.applyConfig(config([execute, invoke]))
    const back = await routeOf()
    expect(back).toMatchObject({ requests: 1, lastSeen: before.lastSeen, lastSeenNonExempt: before.lastSeenNonExempt, distinctClients: 1 })
    expect(back.clients).toEqual([expect.objectContaining({ clientId: clientIdOf(TOKEN) })])
  })
})

describe('the session start lock across reloads (SPEC 4 step 3, Redis)', () => {
  const redis = useRedisServer()

  it('lives as long as the reloaded limits.upstreamTimeoutMs says, not the start config\'s', async () => {
    const upstream = await startFaultUpstream(() => {})
    const prefix = 'v4gw-lock-reload:'
    const config = (upstreamTimeoutMs: number) =>
      deepFreeze(configSchema.parse(testConfig(upstream.url, { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: prefix } }, limits: { upstreamTimeoutMs } })))
    const gw = await startGateway(config(2_000))
    await gw.gateway.applyConfig(config(8_000))
    const held = send(gw.url, '/v1/runs/r-lock/invoke', { headers: AUTH, json: { input: 1 } })
    await until(() => upstream.exchanges.some((exchange) => exchange.url === '/v4/sessions.start'))
    const [lockKey] = await redis.client().keys(`${prefix}l:*`)
    expect(lockKey).toBeDefined()
    const pttl = await redis.client().pttl(lockKey as string)
    expect(pttl).toBeGreaterThan(2_000)
    expect(pttl).toBeLessThanOrEqual(8_000)
    answerJson(upstream.exchanges.find((exchange) => exchange.url === '/v4/sessions.start') as FaultExchange, 200, { sessionId: 'sess-lock' })
    await until(() => upstream.exchanges.some((exchange) => exchange.url.endsWith('/executions.execute')))
    answerJson(upstream.exchanges.find((exchange) => exchange.url.endsWith('/executions.execute')) as FaultExchange, 200, { output: 'ran' })
    expect((await held).status).toBe(200)
  })
})
