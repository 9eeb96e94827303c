import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { buildRedisKeys } from '../../src/sessions/redis-keys.js'
import { buildSessionKey, fingerprintToken } from '../../src/sessions/session-key.js'
import { send, type Answer } from '../helpers/http.js'
import { useRedisServer, useReplicas } from '../helpers/redis-server.js'
import type { StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

const TOKEN = 'demo-token-alice'
const START_PATH = '/v4/sessions.start'
const KEY_PREFIX = 'lock:'
const ORPHAN_LOCK_MS = 1_500

function invoke(replica: StartedGateway, stateId: string): Promise<Answer> {
  return send(replica.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: 1, stateId } })
}

/** The start lock the gateway takes for a call on `stateId` without state (SPEC 4 step 1 key). */
function lockKeyOf(stateId: string, upstreamUrl: string): string {
  const mapKey = buildSessionKey('acme', new URL(upstreamUrl).origin, fingerprintToken(TOKEN, 'header'), stateId, {})
  return buildRedisKeys(KEY_PREFIX).lock('acme', mapKey)
}

describe('a lock owner that died (the shared store keeps serving, SPEC 12)', () => {
  const redis = useRedisServer()
  const sim = useSimulator()
  const replicas = useReplicas(2, () => ({ upstreamUrl: sim.url, redisUrl: redis.url, keyPrefix: KEY_PREFIX }))

  it('holds up the key only until the orphaned lock expires, then another replica starts the session', async () => {
    // What a replica leaves when it dies after SET NX PX and before storing a session: a lock, no value.
    expect(await redis.client().set(lockKeyOf('orphaned', sim.url), 'crashed-replica', 'PX', ORPHAN_LOCK_MS, 'NX')).toBe('OK')
    sim.simulator.resetCalls()
    const began = Date.now()
    const calls = Promise.all(Array.from({ length: 10 }, (_, index) => invoke(replicas[index % 2] as StartedGateway, 'orphaned')))

    await sleep(ORPHAN_LOCK_MS - 500)
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(0)

    const answers = await calls
    const elapsedMs = Date.now() - began
    expect(answers.map((answer) => answer.status)).toEqual(Array<number>(10).fill(200))
    expect(new Set(answers.map((answer) => answer.headers['x-v4-session-id'])).size).toBe(1)
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(1)
    expect(elapsedMs).toBeGreaterThanOrEqual(ORPHAN_LOCK_MS - 100)
    expect(elapsedMs).toBeLessThan(ORPHAN_LOCK_MS + 3_000)
  })

  it('leaves no lock behind after a start', async () => {
    expect((await invoke(replicas[0] as StartedGateway, 'clean')).status).toBe(200)
    expect(await redis.client().exists(lockKeyOf('clean', sim.url))).toBe(0)
  })
})
