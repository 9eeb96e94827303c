import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { startRecordingUpstream } from '../helpers/recording-upstream.js'
import { startReplicas, until, useRedisServer } from '../helpers/redis-server.js'
import { useSimulator } from '../helpers/start-simulator.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }
const PASSWORD = 'acl-test-password-7'

/** The `ACL SETUSER` line docs/scaling.md tells operators to run, as written there. */
function documentedAclLine(): string[] {
  const doc = readFileSync(new URL('../../docs/scaling.md', import.meta.url), 'utf8')
  const line = /^```sh\n(ACL SETUSER [^\n]+)\n```$/m.exec(doc)?.[1]
  if (line === undefined) throw new Error('docs/scaling.md has no ```sh block with an ACL SETUSER line')
  return line.split(' ')
}

/** Every `v4gw_store_unavailable_total` series of a scrape, summed. */
function storeUnavailable(metrics: string): number {
  return [...metrics.matchAll(/^v4gw_store_unavailable_total\{[^}]*\} (\d+)$/gm)].reduce((sum, match) => sum + Number(match[1]), 0)
}

// SPEC 12: one Redis shared by the fleet's features. A user restricted as the docs say must be
// allowed every command the gateway sends; Redis records each refusal in ACL LOG.
describe('the Redis ACL user docs/scaling.md writes', () => {
  const redis = useRedisServer()
  const sim = useSimulator()

  it('lets two replicas share sessions, keyed runs, registry counts and shadow results with no command refused', async () => {
    const [acl, setuser, user, ...rules] = documentedAclLine()
    expect([acl, setuser, user]).toEqual(['ACL', 'SETUSER', 'v4gw'])
    await redis.client().call('ACL', 'SETUSER', 'v4gw', ...rules.map((rule) => (rule === '>CHANGE-ME' ? `>${PASSWORD}` : rule)))
    await redis.client().call('ACL', 'LOG', 'RESET')
    const url = new URL(redis.url)
    url.username = 'v4gw'
    url.password = PASSWORD
    // A database of its own: ioredis selects it on each connection.
    url.pathname = '/2'
    const legacy = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end('{"output":"legacy","meta":{}}')
    })
    const replicas = await startReplicas(2, sim.url, url.href, 'v4gw:acl-test:', {
      tenants: {
        acme: { upstream: { staging: sim.url }, legacy: { idempotency: {} } },
        shadowed: { upstream: { staging: sim.url, legacy: legacy.url }, migration: { stage: 'shadow' } }
      }
    })
    const [a, b] = replicas as [(typeof replicas)[number], (typeof replicas)[number]]
    sim.simulator.resetCalls()
    // One session for one identity and state across the replicas (a shared read: MULTI/EXEC).
    for (const replica of [a, b, a]) {
      expect((await send(replica.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'acl-state' } })).status).toBe(200)
    }
    expect(sim.simulator.countCalls('POST', '/v4/sessions.start')).toBe(1)
    // A keyed run replayed by the other replica (SPEC 16's records).
    const keyed = { ...ALICE, 'idempotency-key': 'acl-key-1' }
    expect((await send(a.url, '/v1/headless/runs', { headers: keyed, json: { input: 1 } })).status).toBe(200)
    const replayed = await send(b.url, '/v1/headless/runs', { headers: keyed, json: { input: 1 } })
    expect(replayed.headers['idempotent-replayed']).toBe('true')
    // A comparison (SPEC 15), its results written and read fleet-wide, and a reset.
    expect((await send(a.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-tenant-id': 'shadowed' }, json: { input: 1 } })).status).toBe(200)
    await until(async () => {
      await a.gateway.shadow.flush()
      return (await send(b.adminUrl, '/admin/shadow?tenant=shadowed')).json.tenants.shadowed?.['POST /v1/headless/runs']?.comparisons === 1
    })
    expect((await send(b.adminUrl, '/admin/shadow?tenant=shadowed', { method: 'DELETE' })).json.scope).toBe('fleet')
    // The registry's fleet answer; a pause and a stage override set and taken back (SPEC 13, 14).
    expect((await send(a.adminUrl, '/admin/migration')).json.scope).toBe('fleet')
    const until1h = new Date(Date.now() + 3_600_000).toISOString()
    expect((await send(a.adminUrl, '/admin/brownouts/pause', { method: 'POST', json: { tenant: 'acme', until: until1h, reason: 'acl test' } })).json.scope).toBe('fleet')
    expect((await send(b.adminUrl, '/admin/brownouts/pause?tenant=acme', { method: 'DELETE' })).json.scope).toBe('fleet')
    expect((await send(a.adminUrl, '/admin/migration/stage', { method: 'PUT', json: { tenant: 'acme', stage: 'translate', reason: 'acl test' } })).json.scope).toBe('fleet')
    expect((await send(b.adminUrl, '/admin/migration/stage?tenant=acme', { method: 'DELETE' })).json.scope).toBe('fleet')
    // The session map's admin calls (SCAN, UNLINK).
    expect((await send(a.adminUrl, '/admin/sessions')).json.tenants.acme).toBe(1)
    expect((await send(b.adminUrl, '/admin/sessions?tenant=acme', { method: 'DELETE' })).json.deleted).toBe(1)
    for (const replica of replicas) expect(storeUnavailable((await send(replica.adminUrl, '/metrics')).text)).toBe(0)
    // Closing writes the last counts.
    for (const replica of replicas) await replica.close()
    expect(await redis.client().call('ACL', 'LOG')).toEqual([])
  })
})
