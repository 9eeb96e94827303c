import { describe, expect, it } from 'vitest'
import { send, type Answer } from '../helpers/http.js'
import { until, useRedisServer } from '../helpers/redis-server.js'
import { startGateway, testConfig, useGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

/**
 * SPEC 13's pause as the fleet's emergency lever (SPEC 12, 14): several gateways on one real
 * redis-server, each with its own connection, as replicas behind a load balancer are.
 */
const HOUR = 3_600_000
const DAY = 24 * HOUR
const iso = (ms: number): string => new Date(ms).toISOString()
const ALICE = { authorization: 'Bearer demo-token-alice' }
/** SPEC 12/14: a change reaches every replica within 2 s. */
const FLEET_DELAY_MS = 2_000

function brownoutConfig(simulatorUrl: string, redisUrl: string): Record<string, unknown> {
  const now = Date.now()
  return testConfig(simulatorUrl, {
    store: { kind: 'redis', redis: { url: redisUrl, keyPrefix: 'pauses:' } },
    tenants: {
      acme: {
        upstream: { staging: simulatorUrl },
        legacy: {
          deprecation: {
            date: iso(now - 30 * DAY),
            sunset: iso(now + 30 * DAY),
            link: 'https://docs.example.com/v4',
            brownouts: { windows: [{ start: iso(now - HOUR), end: iso(now + 6 * HOUR) }] }
          }
        }
      }
    }
  })
}

function call(replica: StartedGateway): Promise<Answer> {
  return send(replica.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
}

async function servedWithin(replica: StartedGateway, expected: 200 | 410, ms = FLEET_DELAY_MS): Promise<void> {
  await until(async () => (await call(replica)).status === expected, ms, 50)
}

function pause(replica: StartedGateway, reason: string): Promise<Answer> {
  return send(replica.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', until: iso(Date.now() + HOUR), reason } })
}

async function metric(replica: StartedGateway, pattern: RegExp): Promise<string | undefined> {
  return pattern.exec((await send(replica.adminUrl, '/metrics')).text)?.[1]
}

describe('brownout pauses shared by the fleet through Redis (SPEC 13, 14)', () => {
  const redis = useRedisServer()
  const sim = useSimulator()
  const start = (): Promise<StartedGateway> => startGateway(brownoutConfig(sim.url, redis.url))

  it('reaches every replica within 2 s, and so does its removal, each with scope fleet', async () => {
    const [a, b] = [await start(), await start()]
    expect((await call(b)).status).toBe(410)

    const paused = await pause(a, 'incident 7')
    expect(paused.json).toMatchObject({ pause: { tenant: 'acme', route: null, reason: 'incident 7' }, scope: 'fleet' })
    expect((await call(a)).status).toBe(200)
    await servedWithin(b, 200)

    const resumed = await send(b.adminUrl, '/admin/brownouts/pause?tenant=acme', { method: 'DELETE' })
    expect(resumed.json).toMatchObject({ pause: { tenant: 'acme', reason: 'incident 7' }, scope: 'fleet' })
    expect((await call(b)).status).toBe(410)
    await servedWithin(a, 410)
    // The removal stays removed: a's older copy is not written back over it.
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect((await call(a)).status).toBe(410)
    expect((await call(b)).status).toBe(410)
  })

  it('is removed by a replica that has not refreshed since it was set, fleet-wide', async () => {
    const [a, b] = [await start(), await start()]
    expect((await pause(a, 'incident 8')).json).toMatchObject({ scope: 'fleet' })
    // At once, before b's copy (refreshed every second) holds it: b reads the store to decide.
    const resumed = await send(b.adminUrl, '/admin/brownouts/pause?tenant=acme', { method: 'DELETE' })
    expect(resumed.json).toMatchObject({ pause: { tenant: 'acme', reason: 'incident 8' }, scope: 'fleet' })
    await servedWithin(a, 410)
    expect((await call(b)).status).toBe(410)
  })

  it('survives every replica restarting: a new process serves the pause from its first request', async () => {
    const a = await start()
    await pause(a, 'kept across restarts')
    await a.close()
    const fresh = await start()
    expect((await call(fresh)).status).toBe(200)
    await send(fresh.adminUrl, '/admin/brownouts/pause?tenant=acme', { method: 'DELETE' })
  })

  it('is written back by the replicas when the store answers but has lost it', async () => {
    const a = await start()
    await pause(a, 'kept across a flush')
    await redis.client().flushall()
    await until(async () => (await redis.client().hlen('pauses:f:pauses')) === 1, FLEET_DELAY_MS, 50)
    const later = await start()
    expect((await call(later)).status).toBe(200)
    await send(later.adminUrl, '/admin/brownouts/pause?tenant=acme', { method: 'DELETE' })
  })
})

describe('a pause taken while Redis is down (SPEC 14: local, written back when it answers)', () => {
  const redis = useRedisServer()
  const sim = useSimulator()
  const a = useGateway(() => brownoutConfig(sim.url, redis.url))
  const b = useGateway(() => brownoutConfig(sim.url, redis.url))

  it('applies on the replica that took it with scope local, and reaches the others once Redis is back', async () => {
    expect(await metric(a, /^v4gw_store_up (\d)$/m)).toBe('1')
    const offset = Number(await metric(a, /^v4gw_clock_offset_seconds (\S+)$/m))
    expect(Math.abs(offset)).toBeLessThan(1)

    await redis.kill()
    await until(async () => (await metric(a, /^v4gw_store_up (\d)$/m)) === '0')
    const paused = await pause(a, 'taken during the outage')
    expect(paused.json).toMatchObject({ scope: 'local' })
    expect((await call(a)).status).toBe(200)
    expect((await call(b)).status).toBe(410)

    await redis.restart()
    await until(async () => (await metric(b, /^v4gw_store_up (\d)$/m)) === '1', 5_000)
    await servedWithin(b, 200, 2 * FLEET_DELAY_MS)
    expect(await redis.client().hlen('pauses:f:pauses')).toBe(1)
  })

  it('counts session-map misses served without the store, by feature', async () => {
    await redis.kill()
    await until(async () => (await metric(a, /^v4gw_store_up (\d)$/m)) === '0')
    // A session-execute call for a state never seen: a miss that would have asked the store.
    const answer = await send(a.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'outage-miss' } })
    expect(answer.status).toBe(200)
    expect(Number(await metric(a, /^v4gw_store_unavailable_total\{feature="sessions"\} (\d+)$/m))).toBeGreaterThanOrEqual(1)
  })
})
