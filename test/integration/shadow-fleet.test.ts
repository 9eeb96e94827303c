import type { ServerResponse } from 'node:http'
import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { startRecordingUpstream } from '../helpers/recording-upstream.js'
import { until, useRedisServer } from '../helpers/redis-server.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'

const EXECUTE = 'POST /v1/headless/runs'
const ANSWER = { output: { text: 'done' }, effective: { policy: 'p', route: 'r', risk: 'low' }, meta: {} }

function json(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(JSON.stringify(body))
}

/** SPEC 15 "Results": with Redis the answer is the fleet's, whichever replica is asked. */
describe('shadow results of three gateways on one real redis-server', () => {
  const redis = useRedisServer()

  async function fleet(keyPrefix: string): Promise<StartedGateway[]> {
    const v4 = await startRecordingUpstream((request, response) => json(response, 200, request.headers['x-request-id']?.toString().startsWith('differs') ? { ...ANSWER, output: { text: 'other' } } : ANSWER))
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, ANSWER))
    const config = testConfig(v4.url, {
      store: { kind: 'redis', redis: { url: redis.url, keyPrefix }, flushMs: 50 },
      tenants: { acme: { upstream: { staging: v4.url, legacy: legacy.url }, migration: { stage: 'shadow' } } }
    })
    return [await startGateway(config), await startGateway(config), await startGateway(config)]
  }

  async function routeOf(gw: StartedGateway): Promise<{ scope: string; route: Record<string, any> }> { // eslint-disable-line @typescript-eslint/no-explicit-any -- the answer's shape is what is asserted
    const answer = (await send(gw.adminUrl, '/admin/shadow?tenant=acme')).json
    return { scope: answer.scope, route: answer.tenants.acme[EXECUTE] }
  }

  function execute(gw: StartedGateway, requestId: string) {
    return send(gw.url, '/v1/headless/runs', { headers: { authorization: 'Bearer sess_fleet_token', 'x-request-id': requestId }, json: { input: 1 } })
  }

  it('gives one fleet-wide answer from every replica: counts summed, pointers and samples of all', async () => {
    const gateways = await fleet('shfleet1:')
    for (const [index, gw] of gateways.entries()) {
      await execute(gw, `same-${index}`)
      await execute(gw, `differs-${index}`)
    }
    // Each replica's comparisons reach the store within its flushMs: every replica reads all six once they have.
    for (const gw of gateways) await until(async () => (await routeOf(gw)).route.comparisons === 6, 10_000)
    for (const gw of gateways) {
      const { scope, route } = await routeOf(gw)
      expect(scope).toBe('fleet')
      expect(route).toMatchObject({ comparisons: 6, matches: 3, mismatches: 3, mismatchRate: 0.5, last24h: { comparisons: 6 }, topPointers: [{ pointer: '/output/text', count: 3 }] })
      expect(route.samples.map((sample: { requestId: string }) => sample.requestId).sort()).toEqual(['differs-0', 'differs-1', 'differs-2'])
    }
  })

  it('resets the counts of the whole fleet from one replica', async () => {
    const gateways = await fleet('shfleet2:')
    for (const [index, gw] of gateways.entries()) await execute(gw, `same-${index}`)
    await until(async () => (await routeOf(gateways[2] as StartedGateway)).route.comparisons === 3, 10_000)
    const reset = await send((gateways[1] as StartedGateway).adminUrl, `/admin/shadow?tenant=acme&route=${encodeURIComponent(EXECUTE)}`, { method: 'DELETE' })
    expect(reset.json).toEqual({ reset: { tenant: 'acme', route: EXECUTE }, scope: 'fleet' })
    // A replica's answer holds its own unflushed tally until its next flush (store.flushMs), which
    // drops counts made wholly before the reset (fleet/shadow-results.ts): 0 everywhere within it.
    for (const gw of gateways) await until(async () => (await routeOf(gw)).route.comparisons === 0, 2_000)
    await execute(gateways[0] as StartedGateway, 'after-reset')
    await until(async () => (await routeOf(gateways[2] as StartedGateway)).route.comparisons === 1, 10_000)
  })
})
