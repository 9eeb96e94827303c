import { describe, expect, it } from 'vitest'
import { answerJson, startFaultUpstream, type FaultExchange, type FaultUpstream } from '../helpers/fault-upstream.js'
import { send } from '../helpers/http.js'
import { startRedisServer, until } from '../helpers/redis-server.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'

const AUTH = { authorization: 'Bearer tok-idem-outage-51d0' }
const EXECUTE = '/v1/headless/runs'
const PREFIX = 'idem-outage:'

function executions(upstream: FaultUpstream): FaultExchange[] {
  return upstream.exchanges.filter((exchange) => exchange.url === '/v4/execute')
}

function keyed(key: string): Record<string, string> {
  return { ...AUTH, 'idempotency-key': key }
}

async function metric(gateway: StartedGateway, series: string): Promise<string | undefined> {
  const text = (await send(gateway.adminUrl, '/metrics')).text
  return text.split('\n').find((line) => line.startsWith(`${series} `))?.slice(series.length + 1)
}

function outcomes(gateway: StartedGateway): unknown[] {
  return gateway.logs.lines().filter((line) => line.msg === 'request').map((line) => line.idempotency)
}

// One scenario, in order: Redis up, killed, restarted (SPEC 16 "Store down", SPEC 12).
describe('SPEC 16 records while the shared store is down', () => {
  it('serves keyed requests from this replica\'s memory while Redis is down, counted as store_unavailable, and goes back to Redis when it answers', { timeout: 60_000 }, async () => {
    const redis = await startRedisServer()
    const upstream = await startFaultUpstream((exchange) => answerJson(exchange, 200, { output: 'ran' }))
    const gateway = await startGateway(
      testConfig(upstream.url, { store: { kind: 'redis', redis: { url: redis.url, keyPrefix: PREFIX } }, tenants: { acme: { upstream: { staging: upstream.url }, legacy: { idempotency: {} } } } })
    )
    await until(async () => (await metric(gateway, 'v4gw_store_up')) === '1')

    await redis.kill()
    await until(async () => (await metric(gateway, 'v4gw_store_up')) === '0')
    const first = await send(gateway.url, EXECUTE, { headers: keyed('during-outage'), json: { input: 1 } })
    const retry = await send(gateway.url, EXECUTE, { headers: keyed('during-outage'), json: { input: 1 } })
    expect(first.status).toBe(200)
    expect(retry.headers['idempotent-replayed']).toBe('true')
    expect(executions(upstream)).toHaveLength(1)
    expect(outcomes(gateway)).toEqual(['store_unavailable', 'store_unavailable'])
    expect(await metric(gateway, 'v4gw_idempotency_total{tenant="acme",route="POST /v1/headless/runs",outcome="store_unavailable"}')).toBe('2')
    expect(await metric(gateway, 'v4gw_store_unavailable_total{feature="idempotency"}')).toBe('2')

    await redis.restart()
    await until(async () => (await metric(gateway, 'v4gw_store_up')) === '1')
    const back = await send(gateway.url, EXECUTE, { headers: keyed('after-outage'), json: { input: 2 } })
    expect(back.status).toBe(200)
    // In Redis again: the new record is there, the outage's was never written to it (SPEC 16).
    expect(await redis.client().keys(`${PREFIX}i:*`)).toHaveLength(1)
    // The outage's record still answers on this replica: its execution ran here.
    const lateRetry = await send(gateway.url, EXECUTE, { headers: keyed('during-outage'), json: { input: 1 } })
    expect(lateRetry.headers['idempotent-replayed']).toBe('true')
    expect(executions(upstream)).toHaveLength(2)
    expect(outcomes(gateway).slice(2)).toEqual(['executed', 'replayed'])
    expect(await metric(gateway, 'v4gw_store_unavailable_total{feature="idempotency"}')).toBe('2')
    // explain reads the records where the listener would, without claiming: Redis's, the outage's, none.
    const explain = async (key: string, input: number) =>
      (await send(gateway.adminUrl, '/admin/explain', { json: { method: 'POST', path: EXECUTE, headers: keyed(key), body: { input } } })).json.idempotency
    expect(await explain('after-outage', 2)).toMatchObject({ record: 'answer', would: 'replay' })
    expect(await explain('during-outage', 1)).toMatchObject({ record: 'answer', would: 'replay' })
    expect(await explain('after-outage', 3)).toMatchObject({ record: 'other-request', would: 'refuse' })
    expect(await explain('never-sent', 1)).toMatchObject({ record: 'none', would: 'execute' })
    expect(await redis.client().keys(`${PREFIX}i:*`)).toHaveLength(1)
    // The connection logs each change once, however many requests the outage saw.
    expect(gateway.logs.lines().filter((line) => String(line.msg).startsWith('store redis is down'))).toHaveLength(1)
  })
})
