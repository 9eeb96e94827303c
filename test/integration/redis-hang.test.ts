import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { send, type Answer } from '../helpers/http.js'
import { readSessionStoreStatus, until, useRedisServer, useReplicas } from '../helpers/redis-server.js'
import type { StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }
const DOWN_MESSAGE = 'store redis is down'
const UP_MESSAGE = 'store redis is up'

// Redis that stops answering with its connections open (a hung or paused server, or a network
// that drops packets): no connection event says so, only commands that time out.
describe('Redis that hangs with its connection open (issue 7 point 4)', () => {
  const redis = useRedisServer()
  const sim = useSimulator()
  const [replica] = useReplicas(1, () => ({ upstreamUrl: sim.url, redisUrl: redis.url, keyPrefix: 'hang:' })) as [StartedGateway]
  const hungAnswers: Answer[] = []

  function invoke(stateId: string): Promise<Answer> {
    return send(replica.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId } })
  }

  function transitions(message: string): Record<string, unknown>[] {
    return replica.logs.lines().filter((line) => String(line.msg).startsWith(message))
  }

  async function storeStatus(): Promise<string | undefined> {
    return ((await readSessionStoreStatus(replica.adminUrl)) as { redis?: string } | undefined)?.redis
  }

  beforeAll(async () => {
    await until(async () => (await storeStatus()) === 'up')
    expect((await invoke('before')).status).toBe(200)
    redis.pause()
    // Each miss waits out its Redis commands (1 s each) until three in a row have timed out.
    for (let index = 0; index < 3; index++) hungAnswers.push(await invoke(`while-hung-${index}`))
  }, 30_000)
  // Before the replica and the server close (after-hooks run last first).
  afterAll(() => {
    redis.resume()
  })

  it('answers the calls made while Redis hangs, from this replica', () => {
    expect(hungAnswers.map((answer) => answer.status)).toEqual([200, 200, 200])
  })

  it('counts Redis down after commands time out, though its connection stands: readiness, metric and one log line', async () => {
    await until(async () => (await storeStatus()) === 'down')
    expect(/^v4gw_session_store_redis_up (\d)$/m.exec((await send(replica.adminUrl, '/metrics')).text)?.[1]).toBe('0')
    expect(transitions(DOWN_MESSAGE)).toHaveLength(1)
    expect(transitions(DOWN_MESSAGE)[0]?.reason).toBe('COMMAND_TIMEOUT')
  })

  it('stops sending to the hung server: a new session is started without waiting for Redis', async () => {
    const startedAt = performance.now()
    const answer = await invoke('after-down')
    // A call that still waited on Redis would take at least one command timeout (1 s).
    expect(answer.status).toBe(200)
    expect(performance.now() - startedAt).toBeLessThan(1_000)
  })

  it('goes back to Redis once it answers again: a PING brings it up, logged once', async () => {
    redis.resume()
    await until(async () => (await storeStatus()) === 'up', 10_000)
    expect(transitions(UP_MESSAGE)).toHaveLength(2)
    expect(transitions(DOWN_MESSAGE)).toHaveLength(1)
    expect((await invoke('after-resume')).status).toBe(200)
  })
})
