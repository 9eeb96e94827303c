import { describe, expect, it } from 'vitest'
import { buildRedisKeys } from '../../src/sessions/redis-keys.js'
import { buildSessionKey, fingerprintToken } from '../../src/sessions/session-key.js'
import { send, type Answer } from '../helpers/http.js'
import { startRecordingUpstream } from '../helpers/recording-upstream.js'
import { startReplicas, useRedisServer } from '../helpers/redis-server.js'
import type { StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

const PLANTED_TOKEN = 'planted-raw-token-7c1e9a'
const START_PATH = '/v4/sessions.start'
const EXECUTION_PATH = /^\/v4\/sessions\/([^/]+)\/executions\.execute$/

const redis = useRedisServer()
const sim = useSimulator({ sessionTokens: { [PLANTED_TOKEN]: { subject: 'user_planted', roles: [] } } })
let prefixCount = 0

function invoke(replica: StartedGateway, stateId: string, headers: Record<string, string> = {}): Promise<Answer> {
  return send(replica.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${PLANTED_TOKEN}`, ...headers }, json: { input: 1, stateId } })
}

function sessionKeyOf(keyPrefix: string, stateId: string, tenant = 'acme', upstreamUrl = sim.url): string {
  return buildRedisKeys(keyPrefix).session(tenant, buildSessionKey(tenant, new URL(upstreamUrl).origin, fingerprintToken(PLANTED_TOKEN, 'header'), stateId, {}))
}

async function allKeys(pattern: string): Promise<string[]> {
  const found: string[] = []
  let cursor = '0'
  do {
    const [next, keys] = await redis.client().scan(cursor, 'MATCH', pattern, 'COUNT', 1_000)
    cursor = next
    found.push(...keys)
  } while (cursor !== '0')
  return found
}

/** Two tenants on the simulator; `beta` is chosen with x-tenant-id. */
function twoTenants(): Record<string, unknown> {
  return { tenants: { acme: { upstream: { staging: sim.url } }, beta: { upstream: { staging: sim.url } } } }
}

describe('evictions reach the shared map (one session per identity across replicas, SPEC 4)', () => {
  it('deletes the shared entry on a stale status, and the replacement is what every replica then uses', async () => {
    const keyPrefix = `e${++prefixCount}:`
    const [replicaA, replicaB] = (await startReplicas(2, sim.url, redis.url, keyPrefix)) as [StartedGateway, StartedGateway]
    const first = await invoke(replicaA, 'goes-stale')
    expect((await invoke(replicaB, 'goes-stale')).headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
    sim.simulator.expireSession(first.headers['x-v4-session-id'] as string)

    const replaced = await invoke(replicaA, 'goes-stale')
    expect(replaced.status).toBe(200)
    expect(replaced.headers['x-v4-session-id']).not.toBe(first.headers['x-v4-session-id'])
    expect(await redis.client().get(sessionKeyOf(keyPrefix, 'goes-stale'))).toBe(replaced.headers['x-v4-session-id'])

    // B still holds the stale session locally: its own stale answer leads it to the shared replacement.
    const startsBefore = sim.simulator.countCalls('POST', START_PATH)
    const onB = await invoke(replicaB, 'goes-stale')
    expect(onB.status).toBe(200)
    expect(onB.headers['x-v4-session-id']).toBe(replaced.headers['x-v4-session-id'])
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(startsBefore)
  })

  it('deletes the shared entry when an execution answers 401, so the next replica starts a new session', async () => {
    const refused = new Set<string>()
    let starts = 0
    const upstream = await startRecordingUpstream((request, response) => {
      response.setHeader('content-type', 'application/json')
      if (request.url === START_PATH) {
        response.writeHead(201).end(JSON.stringify({ sessionId: `ses_${++starts}` }))
        return
      }
      const sessionId = decodeURIComponent(EXECUTION_PATH.exec(request.url)?.[1] ?? '')
      if (refused.has(sessionId)) response.writeHead(401).end(JSON.stringify({ error: { code: 'AUTH_INVALID', message: 'token expired' } }))
      else response.writeHead(200).end(JSON.stringify({ output: 'ok' }))
    })
    const keyPrefix = `e${++prefixCount}:`
    const [replicaA, replicaB, replicaC] = (await startReplicas(3, upstream.url, redis.url, keyPrefix)) as [StartedGateway, StartedGateway, StartedGateway]
    expect((await invoke(replicaA, 'refused')).headers['x-v4-session-id']).toBe('ses_1')
    refused.add('ses_1')
    expect((await invoke(replicaB, 'refused')).status).toBe(401)
    expect(await redis.client().exists(sessionKeyOf(keyPrefix, 'refused', 'acme', upstream.url))).toBe(0)
    const onC = await invoke(replicaC, 'refused')
    expect(onC.status).toBe(200)
    expect(onC.headers['x-v4-session-id']).toBe('ses_2')
  })
})

describe('DELETE /admin/sessions with a shared map (one session per identity across replicas, SPEC 4)', () => {
  it("clears only the tenant's shared entries, whichever replica made them", async () => {
    const keyPrefix = `e${++prefixCount}:`
    const [replicaA, replicaB] = (await startReplicas(2, sim.url, redis.url, keyPrefix, twoTenants())) as [StartedGateway, StartedGateway]
    await invoke(replicaA, 'acme-1')
    await invoke(replicaB, 'acme-2')
    await invoke(replicaA, 'beta-1', { 'x-tenant-id': 'beta' })
    await invoke(replicaB, 'beta-2', { 'x-tenant-id': 'beta' })

    const cleared = await send(replicaA.adminUrl, '/admin/sessions?tenant=acme', { method: 'DELETE' })
    expect(cleared.json).toEqual({ deleted: 2 })
    expect(await allKeys(`${keyPrefix}s:acme:*`)).toEqual([])
    expect((await allKeys(`${keyPrefix}s:beta:*`)).sort()).toEqual([sessionKeyOf(keyPrefix, 'beta-1', 'beta'), sessionKeyOf(keyPrefix, 'beta-2', 'beta')].sort())
    expect((await send(replicaB.adminUrl, '/admin/sessions')).json).toEqual({ total: 2, tenants: { beta: 2 } })
  })

  it('makes a replica that never held the entry start a new session after the clear', async () => {
    const keyPrefix = `e${++prefixCount}:`
    const [replicaA, replicaB] = (await startReplicas(2, sim.url, redis.url, keyPrefix)) as [StartedGateway, StartedGateway]
    const before = await invoke(replicaA, 'cleared')
    await send(replicaA.adminUrl, '/admin/sessions?tenant=acme', { method: 'DELETE' })
    const after = await invoke(replicaB, 'cleared')
    expect(after.status).toBe(200)
    expect(after.headers['x-v4-session-id']).not.toBe(before.headers['x-v4-session-id'])
  })
})

describe('what the shared map holds (one session per identity across replicas, SPEC 4)', () => {
  it('keeps no raw token in any key or value: keys are prefix, tenant, upstream tag and hash, values the session id', async () => {
    const keyPrefix = `e${++prefixCount}:`
    const replicas = await startReplicas(2, sim.url, redis.url, keyPrefix, twoTenants())
    const answers = await Promise.all([
      invoke(replicas[0] as StartedGateway, `state-with-${PLANTED_TOKEN.slice(0, 4)}`),
      invoke(replicas[1] as StartedGateway, 'plain'),
      invoke(replicas[0] as StartedGateway, 'plain', { 'x-tenant-id': 'beta' })
    ])
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200])
    const keys = await allKeys('*')
    for (const key of keys) expect(key).not.toContain(PLANTED_TOKEN)
    // The session map's family (SPEC 12: the registry and the other shared features keep families
    // of their own below the prefix; registry-secret-safety.test.ts reads every one of those).
    const ours = keys.filter((key) => key.startsWith(`${keyPrefix}s:`))
    expect(ours).toHaveLength(3)
    for (const key of ours) expect(key).toMatch(new RegExp(`^${keyPrefix}s:(acme|beta):[A-Za-z0-9_-]{8}\\.[A-Za-z0-9_-]{43}$`))
    const sessionIds = new Set(answers.map((answer) => answer.headers['x-v4-session-id']))
    for (const key of ours) {
      const value = await redis.client().get(key)
      expect(value).not.toContain(PLANTED_TOKEN)
      expect(sessionIds.has(value ?? '')).toBe(true)
    }
  })
})
