import { createHash } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { buildGateway } from '../../src/app.js'
import { createLegacySimulator } from '../../src/app/legacy-simulator.js'
import { loadConfig } from '../../src/config/load-config.js'
import { clientBucket } from '../../src/plan/client-bucket.js'
import { createSimulator } from '../../src/simulator/index.js'
import { send, type Answer } from '../helpers/http.js'
import { useGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { ownedBySuite } from '../helpers/teardown.js'

/**
 * SPEC 14.1: the embedded legacy backend answers exactly what the gateway answers from the
 * embedded V4 simulator. One gateway, two tenants: `v4` in stage translate on a V4 simulator,
 * `old` in stage legacy on the legacy backend. Every call goes to both; the answers must be equal
 * but for what SPEC 15 always ignores (ids and timing in `meta`), so a shadow comparison of the
 * two matches.
 */

const legacyBackend = ownedBySuite(
  'legacySimulator',
  async () => {
    const backend = createLegacySimulator()
    return { url: await backend.listen(), close: () => backend.close() }
  },
  (started) => started.close()
)
const sim = useSimulator()
const gw = useGateway(() => ({
  log: { level: 'silent' },
  tenancy: { default: 'v4' },
  tenants: {
    v4: { upstream: { staging: sim.url } },
    old: { upstream: { staging: sim.url, legacy: legacyBackend.url }, migration: { stage: 'legacy' } }
  }
}))

const IGNORED_META = ['requestId', 'timingMs', 'sessionId', 'executionId', 'lineageId']

/** An answer as SPEC 15 compares it: the status and the JSON body without the always-ignored meta members. */
function comparable(answer: Answer): { status: number; body: unknown; sessionHeader: boolean; contentType: unknown } {
  const body = structuredClone(answer.json) as { meta?: Record<string, unknown> } | undefined
  if (body?.meta !== undefined) for (const key of IGNORED_META) delete body.meta[key]
  return { status: answer.status, body, sessionHeader: answer.headers['x-v4-session-id'] !== undefined, contentType: answer.headers['content-type'] }
}

interface Call {
  name: string
  path: string
  headers?: Record<string, string>
  body?: string
}

const json = (value: unknown): string => JSON.stringify(value)
const alice = { authorization: 'Bearer demo-token-alice', 'content-type': 'application/json' }

const CALLS: Call[] = [
  { name: 'execute', path: '/v1/headless/runs', headers: alice, body: json({ input: { q: 1 }, policy: 'p', route: 'r', risk: 'high' }) },
  { name: 'execute with a null input and unknown fields', path: '/v1/headless/runs', headers: alice, body: json({ input: null, extra: true }) },
  { name: 'execute with the token in x-session-token', path: '/v1/headless/runs', headers: { 'x-session-token': 'demo-token-bob', 'content-type': 'application/json' }, body: json({ input: 2 }) },
  { name: 'run invoke by stateId, first call', path: '/v1/runs/invoke', headers: alice, body: json({ input: 'a', stateId: 'eq-1', state: { policy: 'sp', risk: 'mid' } }) },
  { name: 'run invoke by stateId, second call in the same state', path: '/v1/runs/invoke', headers: alice, body: json({ input: 'b', stateId: 'eq-1', state: { policy: 'sp', risk: 'mid' }, route: 'call-r' }) },
  { name: 'run invoke by path parameter', path: '/v1/runs/run-7/invoke', headers: alice, body: json({ input: 'c', state: { route: 'sr' } }) },
  { name: 'no credential', path: '/v1/headless/runs', headers: { 'content-type': 'application/json' }, body: json({ input: 1 }) },
  { name: 'a service key on a runtime route', path: '/v1/headless/runs', headers: { 'x-api-key': 'key_demo_admin', 'content-type': 'application/json' }, body: json({ input: 1 }) },
  { name: 'a service-account id', path: '/v1/headless/runs', headers: { 'x-service-api-key': 'sa_robot', 'content-type': 'application/json' }, body: json({ input: 1 }) },
  { name: 'a token the V4 backend does not know', path: '/v1/headless/runs', headers: { authorization: 'Bearer nobody-knows-me', 'content-type': 'application/json' }, body: json({ input: 1 }) },
  { name: 'a body without input', path: '/v1/headless/runs', headers: alice, body: json({ policy: 'p' }) },
  { name: 'a body that is not JSON', path: '/v1/headless/runs', headers: alice, body: '{"input":' },
  { name: 'a text/plain body', path: '/v1/headless/runs', headers: { authorization: 'Bearer demo-token-alice', 'content-type': 'text/plain' }, body: 'input=1' },
  { name: 'a policy that is not a string', path: '/v1/runs/invoke', headers: alice, body: json({ input: 1, policy: 3 }) }
]

describe('the embedded legacy backend (SPEC 14.1)', () => {
  it.each(CALLS.map((call) => [call.name, call] as const))('answers %s exactly as translate + the V4 simulator does', async (_name, call) => {
    const requestId = `eq-${call.name.replace(/[^A-Za-z0-9]/g, '-')}`
    const sendTo = (tenant: string) => send(gw.url, call.path, { method: 'POST', headers: { ...call.headers, 'x-tenant-id': tenant, 'x-request-id': requestId }, body: call.body })
    const translated = await sendTo('v4')
    const fromLegacy = await sendTo('old')
    expect(fromLegacy.headers['x-v4gw-served-by']).toBe('legacy')
    expect(comparable(fromLegacy)).toEqual(comparable(translated))
    // The request id the client gave is the one both answers name.
    if (translated.json?.meta !== undefined) expect(fromLegacy.json.meta.requestId).toBe(translated.json.meta.requestId)
  })

  it('keeps its own stateId sessions: the same state gets the same session on its side', async () => {
    const call = (tenant: string) => send(gw.url, '/v1/runs/invoke', { headers: { ...alice, 'x-tenant-id': tenant }, json: { input: 1, stateId: 'own-state' } })
    const first = await call('old')
    const second = await call('old')
    expect(first.headers['x-v4-session-id']).toMatch(/^ses_/)
    expect(second.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
    expect(second.json.meta.sessionId).toBe(first.json.meta.sessionId)
  })
})

describe('the default config/gateway.yaml on the two built-in backends', () => {
  const started = ownedBySuite(
    'defaultConfigGateway',
    async () => {
      const config = await loadConfig(fileURLToPath(new URL('../../config/gateway.yaml', import.meta.url)), {})
      const v4 = createSimulator({ recordCalls: false, controlRoutes: false })
      const backend = createLegacySimulator()
      const gateway = await buildGateway({ config: { ...config, log: { ...config.log, level: 'silent' } }, embeddedOrigin: await v4.listen(), embeddedLegacyOrigin: await backend.listen() })
      const { trafficUrl } = await gateway.listen({ host: '127.0.0.1', trafficPort: 0, adminPort: 0 })
      return {
        url: trafficUrl,
        async close() {
          await gateway.close()
          await backend.close()
          await v4.close()
        }
      }
    },
    (running) => running.close()
  )
  const staged = (token: string) => ({ authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-tenant-id': 'staged' })

  it('serves the staged tenant in stage shadow from the embedded legacy backend', async () => {
    const answer = await send(started.url, '/v1/headless/runs', { headers: staged('demo-token-bob'), json: { input: 'demo' } })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4gw-served-by']).toBe('legacy')
    expect(answer.json.output).toEqual({ echo: 'demo' })
  })

  it('serves the canary route to the allowed demo client and to bob (inside the 25 %) from V4, and to a client outside it from the legacy backend', async () => {
    const alice = await send(started.url, '/v1/runs/invoke', { headers: staged('demo-token-alice'), json: { input: 1, stateId: 'demo' } })
    expect(alice.status).toBe(200)
    expect(alice.headers['x-v4gw-served-by']).toBe('v4')
    const idOf = (token: string): string => `fp:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`
    // Bob's bucket is inside the 25 % (V4 serves him); a client outside is one whose bucket is
    // not, found by trying names (the demo backends know no such token: the legacy one refuses it).
    expect(clientBucket('canary', 'staged', idOf('demo-token-bob'))).toBeLessThan(2_500)
    const bob = await send(started.url, '/v1/runs/invoke', { headers: staged('demo-token-bob'), json: { input: 1, stateId: 'demo' } })
    expect([bob.status, bob.headers['x-v4gw-served-by']]).toEqual([200, 'v4'])
    let outside = 0
    while (clientBucket('canary', 'staged', idOf(`outside-the-canary-${outside}`)) < 2_500) outside++
    const other = await send(started.url, '/v1/runs/invoke', { headers: staged(`outside-the-canary-${outside}`), json: { input: 1, stateId: 'demo' } })
    expect(other.headers['x-v4gw-served-by']).toBe('legacy')
    expect(other.status).toBe(401)
  })
})
