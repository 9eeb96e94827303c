import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { buildGateway } from '../../src/app.js'
import { createLegacySimulator } from '../../src/app/legacy-simulator.js'
import { loadConfig } from '../../src/config/load-config.js'
import { createSimulator } from '../../src/simulator/index.js'
import { send } from '../helpers/http.js'
import { ownedBySuite } from '../helpers/teardown.js'
import { until } from '../helpers/until.js'

const RUNS = 'POST /v1/headless/runs'

/** SPEC 15 with issue 29 point 5: the default config's staged tenant compares its two built-in backends, and they agree. */
describe('the demo: shadow compare between the embedded legacy backend and the embedded V4 simulator', () => {
  const started = ownedBySuite(
    'defaultConfigGateway',
    async () => {
      const config = await loadConfig(fileURLToPath(new URL('../../config/gateway.yaml', import.meta.url)), {})
      const v4 = createSimulator({ recordCalls: false, controlRoutes: false })
      const backend = createLegacySimulator()
      const gateway = await buildGateway({ config: { ...config, log: { ...config.log, level: 'silent' } }, embeddedOrigin: await v4.listen(), embeddedLegacyOrigin: await backend.listen() })
      const { trafficUrl, adminUrl } = await gateway.listen({ host: '127.0.0.1', trafficPort: 0, adminPort: 0 })
      return {
        url: trafficUrl,
        adminUrl,
        async close() {
          await gateway.close()
          await backend.close()
          await v4.close()
        }
      }
    },
    (running) => running.close()
  )

  it('shows 100 % matches in /admin/shadow after a few legacy calls', async () => {
    const calls = [
      { token: 'demo-token-bob', body: { input: 'demo' } },
      { token: 'demo-token-alice', body: { input: { n: 1 }, policy: 'standard' } },
      { token: 'demo-token-bob', body: { input: [1, 2, 3], route: 'fast', risk: 'low' } }
    ]
    for (const { token, body } of calls) {
      const answer = await send(started.url, '/v1/headless/runs', { headers: { authorization: `Bearer ${token}`, 'x-tenant-id': 'staged' }, json: body })
      expect(answer.status).toBe(200)
      expect(answer.headers['x-v4gw-served-by']).toBe('legacy')
    }
    // A refusal too: the backend refuses a service key as the gateway itself would in translate.
    const refused = await send(started.url, '/v1/headless/runs', { headers: { 'x-api-key': 'key_demo_admin', 'x-tenant-id': 'staged' }, json: { input: 1 } })
    expect(refused.status).toBe(401)
    await until(async () => (await send(started.adminUrl, '/admin/shadow?tenant=staged')).json.tenants.staged[RUNS].comparisons === calls.length + 1)
    const route = (await send(started.adminUrl, '/admin/shadow?tenant=staged')).json.tenants.staged[RUNS]
    expect(route).toMatchObject({ comparisons: 4, matches: 4, mismatches: 0, candidateErrors: 0, primaryErrors: 0, mismatchRate: 0, topPointers: [], samples: [] })
  })
})
