import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { arrivalBarrier } from '../helpers/arrival-barrier.js'
import { send, type Answer } from '../helpers/http.js'
import { startRecordingUpstream } from '../helpers/recording-upstream.js'
import { startReplicas, useRedisServer } from '../helpers/redis-server.js'
import type { StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }
const START_PATH = '/v4/sessions.start'
const EXECUTION_PATH = /^\/v4\/sessions\/([^/]+)\/executions\.execute$/

const redis = useRedisServer()
const sim = useSimulator()
let prefixCount = 0

function invoke(replica: StartedGateway, json: unknown): Promise<Answer> {
  return send(replica.url, '/v1/runs/invoke', { headers: ALICE, json })
}

/** `count` calls on one key, spread round-robin over the replicas as a load balancer would. */
function spread(replicas: StartedGateway[], count: number, stateId: string): Promise<Answer[]> {
  return Promise.all(Array.from({ length: count }, (_, index) => invoke(replicas[index % replicas.length] as StartedGateway, { input: index, stateId })))
}

function sessionOutcomes(replica: StartedGateway): unknown[] {
  return replica.logs.lines().filter((line) => line.msg === 'request').map((line) => line.session)
}

describe('three replicas on one Redis (one session per identity across replicas, SPEC 4)', () => {
  // Sent at once, with no barrier: the overlap (miss and coalesced) is the next test's.
  it('starts exactly one simulator session for 60 first calls sent at once over three replicas', async () => {
    const replicas = await startReplicas(3, sim.url, redis.url, `r${++prefixCount}:`)
    sim.simulator.resetCalls()
    const answers = await spread(replicas, 60, 'shared-by-three')
    expect(answers.map((answer) => answer.status)).toEqual(Array<number>(60).fill(200))
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(1)
    expect(new Set(answers.map((answer) => answer.headers['x-v4-session-id'])).size).toBe(1)
    expect(sim.simulator.countCalls('POST', EXECUTION_PATH)).toBe(60)
  })

  it('makes the replicas that lost the lock wait for the winner and report coalesced', async () => {
    let starts = 0
    const allIn = arrivalBarrier(60)
    const upstream = await startRecordingUpstream(async (request, response) => {
      if (request.url === START_PATH) {
        starts++
        // Held until every call is in a gateway (and has had time to miss), so that all of them overlap the start.
        await allIn.arrived
        await sleep(200)
        response.writeHead(201, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ sessionId: `ses_${starts}` }))
        return
      }
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ output: 'ok' }))
    })
    const replicas = await startReplicas(3, upstream.url, redis.url, `r${++prefixCount}:`)
    allIn.watch(replicas)
    const answers = await spread(replicas, 60, 'slow-start')
    await allIn.arrived
    expect(answers.map((answer) => answer.status)).toEqual(Array<number>(60).fill(200))
    expect(starts).toBe(1)
    expect(new Set(answers.map((answer) => answer.headers['x-v4-session-id']))).toEqual(new Set(['ses_1']))
    const outcomes = replicas.flatMap(sessionOutcomes)
    expect(outcomes.filter((outcome) => outcome === 'miss')).toHaveLength(1)
    expect(outcomes.filter((outcome) => outcome === 'coalesced')).toHaveLength(59)
  })

  it('waits for the next owner\'s start, from when it took the lock, after the first owner\'s start failed', async () => {
    // Each waiter gives up after connectTimeoutMs + upstreamTimeoutMs + 1 s = 4.1 s. The first
    // start never answers (504 at 3 s); the next owner's takes 1.5 s more (1.5 s within its own
    // timeout): a wait counted from the first arrival would end at 4.1 s, within it, and start a third session.
    let starts = 0
    const upstream = await startRecordingUpstream(async (request, response) => {
      if (request.url === START_PATH) {
        const start = ++starts
        if (start === 1) return
        if (start === 2) await sleep(1_500)
        response.writeHead(201, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ sessionId: `ses_${start}` }))
        return
      }
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ output: 'ok' }))
    })
    const replicas = await startReplicas(3, upstream.url, redis.url, `r${++prefixCount}:`, { limits: { upstreamTimeoutMs: 3_000, connectTimeoutMs: 100 } })
    const answers = await spread(replicas, 3, 'handed-on')
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 200, 504])
    expect(starts).toBe(2)
    expect(new Set(answers.filter((answer) => answer.status === 200).map((answer) => answer.headers['x-v4-session-id']))).toEqual(new Set(['ses_2']))
    expect(replicas.flatMap((replica) => replica.logs.lines()).filter((line) => String(line.msg).startsWith('gave up waiting'))).toEqual([])
  })

  it('waits as long as the owner\'s own config lets its start take, when its own allows less (a rolling reload under way)', async () => {
    // The owner, not yet reloaded, may take 4 s to an answer; the waiter, reloaded, only 1 s (its
    // own wait ends at 2.1 s). The owner's start takes 3 s: the waiter must not start a second.
    let starts = 0
    let ownerStarted!: () => void
    const startsIn = new Promise<void>((resolve) => (ownerStarted = resolve))
    const upstream = await startRecordingUpstream(async (request, response) => {
      if (request.url === START_PATH) {
        const start = ++starts
        ownerStarted()
        await sleep(3_000)
        response.writeHead(201, { 'content-type': 'application/json' })
        response.end(JSON.stringify({ sessionId: `ses_${start}` }))
        return
      }
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ output: 'ok' }))
    })
    const keyPrefix = `r${++prefixCount}:`
    const [owner] = await startReplicas(1, upstream.url, redis.url, keyPrefix, { limits: { upstreamTimeoutMs: 4_000, connectTimeoutMs: 100 } })
    const [waiter] = await startReplicas(1, upstream.url, redis.url, keyPrefix, { limits: { upstreamTimeoutMs: 1_000, connectTimeoutMs: 100 } })
    const first = invoke(owner as StartedGateway, { input: 1, stateId: 'rolling' })
    await startsIn
    const second = await invoke(waiter as StartedGateway, { input: 2, stateId: 'rolling' })
    expect((await first).status).toBe(200)
    expect(second.status).toBe(200)
    expect(starts).toBe(1)
    expect(second.headers['x-v4-session-id']).toBe('ses_1')
  })

  it('answers a later call on another replica from the shared map as a hit', async () => {
    const replicas = await startReplicas(2, sim.url, redis.url, `r${++prefixCount}:`)
    sim.simulator.resetCalls()
    const first = await invoke(replicas[0] as StartedGateway, { input: 1, stateId: 'later' })
    const second = await invoke(replicas[1] as StartedGateway, { input: 2, stateId: 'later' })
    expect(second.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(1)
    expect(sessionOutcomes(replicas[1] as StartedGateway)).toEqual(['hit'])
  })

  it('reports the shared store in /readyz and v4gw_session_store_redis_up', async () => {
    const replicas = await startReplicas(1, sim.url, redis.url, `r${++prefixCount}:`)
    const ready = await send((replicas[0] as StartedGateway).adminUrl, '/readyz')
    expect(ready.status).toBe(200)
    expect(ready.json).toEqual({ status: 'ready', configHash: expect.stringMatching(/^[0-9a-f]{12}$/), sessionStore: { kind: 'redis', redis: 'up' } })
    const metrics = await send((replicas[0] as StartedGateway).adminUrl, '/metrics')
    expect(metrics.text).toMatch(/^v4gw_session_store_redis_up 1$/m)
  })

  it('lists the shared entries of every replica in GET /admin/sessions', async () => {
    const keyPrefix = `r${++prefixCount}:`
    const replicas = await startReplicas(2, sim.url, redis.url, keyPrefix)
    await invoke(replicas[0] as StartedGateway, { input: 1, stateId: 'listed-1' })
    await invoke(replicas[1] as StartedGateway, { input: 1, stateId: 'listed-2' })
    const listed = await send((replicas[0] as StartedGateway).adminUrl, '/admin/sessions')
    expect(listed.json).toEqual({ total: 2, tenants: { acme: 2 } })
  })

  it('closes its Redis connection when the gateway closes', async () => {
    const replicas = await startReplicas(1, sim.url, redis.url, `r${++prefixCount}:`)
    const inspect = redis.client()
    const before = Number((await inspect.info('clients')).match(/connected_clients:(\d+)/)?.[1])
    await (replicas.pop() as StartedGateway).close()
    const after = Number((await inspect.info('clients')).match(/connected_clients:(\d+)/)?.[1])
    expect(after).toBe(before - 1)
  })
})
