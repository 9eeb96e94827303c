import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { send, type Answer } from '../helpers/http.js'
import { readSessionStoreStatus, until, useRedisServer, useReplicas } from '../helpers/redis-server.js'
import type { StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }
const START_PATH = '/v4/sessions.start'
const KEY_PREFIX = 'outage:'
const DOWN_MESSAGE = 'store redis is down'
const UP_MESSAGE = 'store redis is up'

function invoke(replica: StartedGateway, stateId: string): Promise<Answer> {
  return send(replica.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId } })
}

function transitions(replica: StartedGateway, message: string): Record<string, unknown>[] {
  return replica.logs.lines().filter((line) => String(line.msg).startsWith(message))
}

async function redisUpMetric(replica: StartedGateway): Promise<string | undefined> {
  return /^v4gw_session_store_redis_up (\d)$/m.exec((await send(replica.adminUrl, '/metrics')).text)?.[1]
}

/** Calls every 10 ms, alternating replicas and keys, until stopped: the traffic an outage must not break. */
function keepCalling(replicas: StartedGateway[]): { stop(): Promise<number[]> } {
  const statuses: number[] = []
  let running = true
  const loop = (async () => {
    for (let index = 0; running; index++) {
      const answer = await invoke(replicas[index % replicas.length] as StartedGateway, `steady-${index % 4}`)
      statuses.push(answer.status)
      await sleep(10)
    }
  })()
  return {
    async stop() {
      running = false
      await loop
      return statuses
    }
  }
}

function allReport(replicas: StartedGateway[], redis: 'up' | 'down'): () => Promise<boolean> {
  return async () => (await Promise.all(replicas.map((replica) => readSessionStoreStatus(replica.adminUrl)))).every((status) => (status as { redis?: string } | undefined)?.redis === redis)
}

// One scenario, in order: steady traffic, Redis killed, Redis restarted.
describe('Redis killed mid-run and restarted (the shared store keeps serving, SPEC 12)', () => {
  const redis = useRedisServer()
  const sim = useSimulator()
  const replicas = useReplicas(2, () => ({ upstreamUrl: sim.url, redisUrl: redis.url, keyPrefix: KEY_PREFIX }))
  const [replicaA, replicaB] = replicas as [StartedGateway, StartedGateway]
  let traffic: { stop(): Promise<number[]> }

  beforeAll(async () => {
    traffic = keepCalling(replicas)
    await sleep(100)
    await redis.kill()
    await until(allReport(replicas, 'down'))
  })
  // Before the replicas close (after-hooks run last first): the traffic would call closed listeners.
  afterAll(async () => {
    await traffic?.stop()
  })

  it('keeps /readyz at 200 with sessionStore.redis down while Redis is away', async () => {
    const ready = await send(replicaA.adminUrl, '/readyz')
    expect(ready.status).toBe(200)
    expect(ready.json).toEqual({ status: 'ready', configHash: expect.stringMatching(/^[0-9a-f]{12}$/), sessionStore: { kind: 'redis', redis: 'down' } })
  })

  it('reports v4gw_session_store_redis_up 0 while Redis is away', async () => {
    expect(await redisUpMetric(replicaA)).toBe('0')
  })

  it("serves with this replica's map while Redis is away: the second call is a hit on the same session", async () => {
    const first = await invoke(replicaA, 'during-outage')
    const second = await invoke(replicaA, 'during-outage')
    expect([first.status, second.status]).toEqual([200, 200])
    expect(second.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
  })

  it('logs the outage once per replica, however many reconnects fail', async () => {
    await sleep(600)
    for (const replica of replicas) expect(transitions(replica, DOWN_MESSAGE)).toHaveLength(1)
    // With why: a killed server closes its connections without an error, which once left the reason out.
    expect(transitions(replicaA, DOWN_MESSAGE)[0]).toMatchObject({ level: 40, store: 'redis', reason: expect.any(String) })
  })

  it('goes back to Redis once it is restarted: logged once, metric 1, readiness details up', async () => {
    await redis.restart()
    await until(allReport(replicas, 'up'))
    // One at start, one now.
    for (const replica of replicas) expect(transitions(replica, UP_MESSAGE)).toHaveLength(2)
    for (const replica of replicas) expect(transitions(replica, DOWN_MESSAGE)).toHaveLength(1)
    expect(await redisUpMetric(replicaA)).toBe('1')
  })

  it('answered every call of the steady traffic with 200, before, during and after the outage', async () => {
    await sleep(100)
    const statuses = await traffic.stop()
    expect(statuses.length).toBeGreaterThan(10)
    expect(statuses.filter((status) => status !== 200)).toEqual([])
  })

  it('shares sessions across replicas again after the restart', async () => {
    const startsBefore = sim.simulator.countCalls('POST', START_PATH)
    const onA = await invoke(replicaA, 'after-restart')
    const onB = await invoke(replicaB, 'after-restart')
    expect(onA.status).toBe(200)
    expect(onB.headers['x-v4-session-id']).toBe(onA.headers['x-v4-session-id'])
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(startsBefore + 1)
    const [, keys] = await redis.client().scan('0', 'MATCH', `${KEY_PREFIX}s:acme:*`, 'COUNT', 1_000)
    expect(keys.length).toBeGreaterThanOrEqual(1)
  })
})
