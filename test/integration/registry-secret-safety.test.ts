import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { until, useRedisServer } from '../helpers/redis-server.js'
import { runCli } from '../helpers/spawn-cli.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

/**
 * SPEC 12: the registry keeps client ids, never credentials. Credentials are planted in every
 * position a legacy client can send one (SPEC 5), and every output the registry feeds is read:
 * /admin/migration, the report in each format, sunset-check, every log line and every key and
 * value the registry wrote to Redis.
 */
const ADMIN_TOKEN = 'adm-planted-7c1e55aa90'
const PLANTED = {
  bearer: 'planted-bearer-3f9a6c2d1e',
  session: 'tok_planted_session_8b7a6f5e',
  apiKey: 'key_planted_api_4d3c2b1a',
  serviceKey: 'sa_planted_service_9e8d7c6b',
  query: 'planted-query-credential-5a4b3c'
}
const SECRETS = [...Object.values(PLANTED), ADMIN_TOKEN]

describe('no credential in any registry output (SPEC 12)', () => {
  const redis = useRedisServer()
  const sim = useSimulator()
  const gw = useGateway(() =>
    testConfig(sim.url, {
      admin: { token: ADMIN_TOKEN },
      credentials: { queryParam: 'access_token' },
      store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'safe:' }, flushMs: 100 },
      tenants: { acme: { upstream: { staging: sim.url }, clients: { key: ['header:x-client-id', 'credential'] } } }
    })
  )
  const env = { V4GW_ADMIN_TOKEN: ADMIN_TOKEN }

  it('keeps client ids only: the answer, report md/csv/json, sunset-check, the log and Redis hold none of the planted credentials', async () => {
    const body = { input: 1, stateId: 'planted-state' }
    await send(gw.url, '/v1/headless/runs', { headers: { authorization: `Bearer ${PLANTED.bearer}` }, json: body })
    await send(gw.url, '/v1/runs/invoke', { headers: { 'x-session-token': PLANTED.session, 'x-client-id': 'billing-batch' }, json: body })
    await send(gw.url, '/v1/headless/runs', { headers: { 'x-api-key': PLANTED.apiKey }, json: body })
    await send(gw.url, '/v1/headless/runs', { headers: { 'x-service-api-key': PLANTED.serviceKey }, json: body })
    await send(gw.url, `/v1/headless/runs?access_token=${PLANTED.query}`, { json: body })
    // Two credentials at once (a conflict: 400, still an id) and a client id header that is itself a credential-like value.
    await send(gw.url, '/v1/headless/runs', { headers: { authorization: `Bearer ${PLANTED.bearer}`, 'x-api-key': PLANTED.apiKey }, json: body })
    await send(gw.url, '/v1/headless/runs', { headers: { 'x-client-id': `Bearer ${PLANTED.bearer}` }, json: body })

    // A request is recorded once its answer has gone out, a moment after the client has it: read once all six are in.
    const migration = () => send(gw.adminUrl, '/admin/migration', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    await until(async () => (await migration()).json?.tenants?.acme?.routes?.['POST /v1/headless/runs']?.requests === 6)
    const answer = await migration()
    expect(answer.status).toBe(200)
    const route = answer.json.tenants.acme.routes['POST /v1/headless/runs']
    expect(route.requests).toBe(6)
    expect(route.clients.map((client: { clientId: string }) => client.clientId)).toEqual(expect.arrayContaining([expect.stringMatching(/^fp:[0-9a-f]{16}$/), expect.stringMatching(/^hdr#[0-9a-f]{16}$/)]))

    const outputs: Record<string, string> = { answer: answer.text }
    const runs = await Promise.all([
      runCli(['report', '--admin', gw.adminUrl], env),
      runCli(['report', '--admin', gw.adminUrl, '--format', 'csv'], env),
      runCli(['report', '--admin', gw.adminUrl, '--format', 'json'], env),
      runCli(['sunset-check', '--admin', gw.adminUrl, '--tenant', 'acme'], env)
    ])
    runs.forEach((run, index) => {
      expect(run.code, run.stderr).toBe(index === 3 ? 1 : 0)
      outputs[`cli ${index}`] = run.stdout + run.stderr
    })
    expect(outputs['cli 0']).toContain('hdr:billing-batch')

    outputs.log = gw.logs.lines().map((line) => JSON.stringify(line)).join('\n')
    const client = redis.client()
    const keys = await client.keys('safe:r:*')
    expect(keys.length).toBeGreaterThan(5)
    const values: string[] = [...keys]
    for (const key of keys) {
      const type = await client.type(key)
      if (type === 'hash') values.push(JSON.stringify(await client.hgetall(key)))
      else if (type === 'zset') values.push(JSON.stringify(await client.zrange(key, 0, -1, 'WITHSCORES')))
      else values.push((await client.getBuffer(key))?.toString('latin1') ?? '')
    }
    outputs.redis = values.join('\n')

    for (const [where, text] of Object.entries(outputs)) {
      for (const secret of SECRETS) expect(text.includes(secret), `${where} holds ${secret}`).toBe(false)
    }
  }, 60_000)
})
