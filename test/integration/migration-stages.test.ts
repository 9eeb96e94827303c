import { createHash } from 'node:crypto'
import { request } from 'undici'
import { describe, expect, it } from 'vitest'
import { clientBucket } from '../../src/plan/client-bucket.js'
import { send } from '../helpers/http.js'
import { expectGatewayError } from '../helpers/gateway-error.js'
import { useRecordingUpstream, type RecordedRequest } from '../helpers/recording-upstream.js'
import { configSchema } from '../../src/config/schema.js'
import { startGateway, useGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

/**
 * SPEC 14 over real sockets: the gateway in front of the V4 simulator and a recording legacy
 * upstream, one tenant per stage. What reached each upstream is read back from it.
 */

const TOKEN = 'demo-token-alice'
const runtime = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }
const fp = (token: string): string => `fp:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`

const legacy = useRecordingUpstream((recorded, response) => {
  response.writeHead(201, { 'content-type': 'application/json', 'x-legacy': 'yes' })
  response.end(JSON.stringify({ from: 'legacy', url: recorded.url }))
})
// A legacy backend misconfigured to send everything back to the gateway (a load balancer's mistake).
const bouncer = useRecordingUpstream(async (recorded, response) => {
  const headers = { ...recorded.headers }
  delete headers.host
  delete headers['content-length']
  delete headers.connection
  const back = await request(`${gw.url}${recorded.url}`, { method: recorded.method as 'POST', headers: headers as Record<string, string>, body: recorded.body.length === 0 ? undefined : recorded.body })
  response.writeHead(back.statusCode, { 'content-type': String(back.headers['content-type']) })
  response.end(Buffer.from(await back.body.arrayBuffer()))
})
const sim = useSimulator()
const gw = useGateway(() => {
  const upstream = { staging: sim.url, legacy: legacy.url }
  return {
    log: { level: 'silent' },
    limits: { bodyBytes: 1_024 },
    tenancy: { default: 'plain' },
    tenants: {
      plain: { upstream: { staging: sim.url } },
      old: { upstream, migration: { stage: 'legacy' } },
      loopy: { upstream: { staging: sim.url, legacy: bouncer.url }, migration: { stage: 'legacy' } },
      shadowed: { upstream, migration: { stage: 'shadow' } },
      retired: {
        upstream: { staging: sim.url },
        legacy: { deprecation: { date: '2026-01-01T00:00:00Z', exempt: [{ client: fp('demo-token-bob'), until: '2099-01-01T00:00:00Z' }] } },
        migration: { stage: 'native-only' }
      },
      mixed: {
        upstream,
        migration: {
          stage: 'canary',
          canary: { percent: 50, allow: [fp(TOKEN)], deny: [fp('demo-token-bob')] },
          routes: { 'POST /v1/headless/runs': { stage: 'translate' } }
        }
      }
    }
  }
})

function lastLegacy(): RecordedRequest {
  return legacy.requests.at(-1) as RecordedRequest
}

describe('SPEC 14 stage translate (the default)', () => {
  it('changes nothing for a tenant without stages: no x-v4gw-served-by, the V4 translation answers', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: runtime, json: { input: 'hi' } })
    expect(answer.status).toBe(200)
    expect(answer.json.output).toEqual({ echo: 'hi' })
    expect(answer.headers['x-v4gw-served-by']).toBeUndefined()
  })

  it('serves a route of a staged tenant set back to translate by V4, and says so', async () => {
    const before = legacy.requests.length
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...runtime, 'x-tenant-id': 'mixed' }, json: { input: 1 } })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4gw-served-by']).toBe('v4')
    expect(legacy.requests.length).toBe(before)
  })
})

describe('SPEC 14 stage legacy', () => {
  it('streams the request to upstream.legacy as it came: path, query, body and the credential as sent', async () => {
    const answer = await send(gw.url, '/v1/runs/r-1/invoke?x=1', { headers: { 'x-tenant-id': 'old', 'x-api-key': 'key_raw_secret', 'content-type': 'application/json' }, body: '{"input":"a","stateId":"s"}' })
    expect(answer.status).toBe(201)
    expect(answer.json).toEqual({ from: 'legacy', url: '/v1/runs/r-1/invoke?x=1' })
    expect(answer.headers['x-legacy']).toBe('yes')
    expect(answer.headers['x-v4gw-served-by']).toBe('legacy')
    const arrived = lastLegacy()
    expect(arrived.method).toBe('POST')
    expect(arrived.headers['x-api-key']).toBe('key_raw_secret')
    expect(arrived.headers.authorization).toBeUndefined()
    expect(arrived.body.toString()).toBe('{"input":"a","stateId":"s"}')
    expect(arrived.headers['x-forwarded-proto']).toBe('http')
  })

  it('sends the request id to upstream.legacy and back in x-request-id (SPEC 6): a valid one as it came, else one new id for both', async () => {
    const kept = await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'old', 'x-request-id': 'lg-1', ...runtime }, json: { input: 1 } })
    expect(kept.status).toBe(201)
    expect(kept.headers['x-request-id']).toBe('lg-1')
    expect(lastLegacy().headers['x-request-id']).toBe('lg-1')
    const replaced = await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'old', 'x-request-id': 'bad id', ...runtime }, json: { input: 1 } })
    expect(replaced.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    expect(lastLegacy().headers['x-request-id']).toBe(replaced.headers['x-request-id'])
  })

  it('refuses nothing the legacy backend would have received: no credential, a text body, a body over limits.bodyBytes', async () => {
    const big = 'x'.repeat(4_096)
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'old', 'content-type': 'text/plain' }, body: big })
    expect(answer.status).toBe(201)
    expect(answer.headers['x-v4gw-served-by']).toBe('legacy')
    expect(lastLegacy().body.toString()).toBe(big)
    expect(lastLegacy().headers['content-type']).toBe('text/plain')
  })

  it('serves stage shadow from the legacy upstream too (the client side of SPEC 15)', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'shadowed', ...runtime }, json: { input: 2 } })
    expect(answer.status).toBe(201)
    expect(answer.headers['x-v4gw-served-by']).toBe('legacy')
  })

  it('answers a failed legacy upstream with the gateway 502, served by the gateway', async () => {
    const down = await startGateway({ log: { level: 'silent' }, tenancy: { default: 'old' }, tenants: { old: { upstream: { staging: sim.url, legacy: 'http://127.0.0.1:9' }, migration: { stage: 'legacy' } } } })
    const answer = await send(down.url, '/v1/headless/runs', { headers: runtime, json: { input: 1 } })
    expect(answer.status).toBe(502)
    expect(answer.json.error.code).toBe('UPSTREAM_UNAVAILABLE')
    expect(answer.headers['x-v4gw-served-by']).toBe('gateway')
    const metrics = await send(down.adminUrl, '/metrics')
    expect(metrics.text).toMatch(/v4gw_upstream_failures_total\{tenant="old",upstream="legacy",cause="refused"\} 1/)
  })
})

describe('SPEC 14 Via and loops', () => {
  it('adds the fleet member to Via on every upstream request: the legacy call, the V4 calls, native traffic', async () => {
    const via = gw.gateway.runtime().via
    expect(via).toMatch(/^1\.1 v4gw-[0-9a-f]{12}$/)
    await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'old', via: '1.0 corp-proxy' }, json: { input: 1 } })
    expect(lastLegacy().headers.via).toBe(`1.0 corp-proxy, ${via}`)
    sim.simulator.resetCalls()
    await send(gw.url, '/v1/headless/runs', { headers: runtime, json: { input: 1 } })
    await send(gw.url, '/v4/policies', { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(sim.simulator.calls.map((call) => call.headers.via)).toEqual([via, via])
  })

  it('answers 508 LOOP_DETECTED to a request that already passed through the fleet, and forwards nothing', async () => {
    const before = legacy.requests.length
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'old', via: `1.1 other, ${gw.gateway.runtime().via}` }, json: { input: 1 } })
    expectGatewayError(answer, 508, 'LOOP_DETECTED')
    // The gateway's own answer to a legacy route of a tenant that uses stages (SPEC 14).
    expect(answer.headers['x-v4gw-served-by']).toBe('gateway')
    expect(legacy.requests.length).toBe(before)
    // On a deprecated route it carries the route's deprecation headers too (SPEC 13: whatever its status).
    const retired = await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'retired', via: gw.gateway.runtime().via }, json: { input: 1 } })
    expect(retired.status).toBe(508)
    expect(retired.headers.deprecation).toBe('@1767225600')
  })

  it('answers 508 to native /v4/* traffic that already passed through the fleet too, and forwards nothing', async () => {
    sim.simulator.resetCalls()
    const answer = await send(gw.url, '/v4/policies', { headers: { authorization: `Bearer ${TOKEN}`, via: gw.gateway.runtime().via } })
    expectGatewayError(answer, 508, 'LOOP_DETECTED')
    expect(sim.simulator.calls).toEqual([])
  })

  it('names the stage and the deprecation headers of a legacy request it refused before planning it (SPEC 17: line, metrics)', async () => {
    const own = await startGateway({
      log: { level: 'info' },
      tenancy: { default: 'retired' },
      tenants: { retired: { upstream: { staging: sim.url }, legacy: { deprecation: { date: '2026-01-01T00:00:00Z' } }, migration: { stage: 'native-only' } } }
    })
    const answer = await send(own.url, '/v1/headless/runs', { headers: { ...runtime, via: own.gateway.runtime().via, 'x-request-id': 'refused-loop-1' }, json: { input: 1 } })
    expect(answer.status).toBe(508)
    expect(answer.headers.deprecation).toBe('@1767225600')
    const line = own.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'refused-loop-1')
    expect(line).toMatchObject({ status: 508, route: 'POST /v1/headless/runs', stage: 'native-only', deprecation: 'header' })
    expect((await send(own.adminUrl, '/metrics')).text).toMatch(/^v4gw_legacy_deprecation_total\{tenant="retired",route="POST \/v1\/headless\/runs",action="header"\} 1$/m)
  })

  it('stops a legacy upstream that sends requests back to the gateway after one round', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'loopy' }, json: { input: 1 } })
    // The way back carries the gateway's Via member: answered 508 there, and that answer comes back.
    expect(answer.status).toBe(508)
    expect(answer.json.error.code).toBe('LOOP_DETECTED')
    expect(bouncer.requests.length).toBe(1)
  })
})

describe('SPEC 14 stage native-only', () => {
  it('answers 410 LEGACY_GONE and forwards nothing, counted as deprecation action gone (SPEC 13), not a brownout', async () => {
    // The suite's gateway is shared: what this request adds to the count.
    const goneCount = async (): Promise<number> =>
      Number(/^v4gw_legacy_deprecation_total\{tenant="retired",route="POST \/v1\/headless\/runs",action="gone"\} (\d+)$/m.exec((await send(gw.adminUrl, '/metrics')).text)?.[1] ?? 0)
    const goneBefore = await goneCount()
    sim.simulator.resetCalls()
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...runtime, 'x-tenant-id': 'retired' }, json: { input: 1 } })
    expectGatewayError(answer, 410, 'LEGACY_GONE', ['migration'])
    expect(answer.json.error.migration).toEqual({ successor: '/v4/execute' })
    expect(answer.headers.deprecation).toBe('@1767225600')
    expect(sim.simulator.calls).toEqual([])
    expect(await goneCount()).toBe(goneBefore + 1)
    // SPEC 12: the registry keeps no lastBrownout for a gone answer.
    const clients = (await send(gw.adminUrl, '/admin/migration?tenant=retired')).json.tenants.retired.routes['POST /v1/headless/runs'].clients
    expect(clients.find((client: { clientId: string }) => client.clientId === fp(TOKEN))).toMatchObject({ lastBrownout: null })
  })

  it('serves an exempt client as in translate, its deprecation action exempt (SPEC 13)', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { authorization: 'Bearer demo-token-bob', 'content-type': 'application/json', 'x-tenant-id': 'retired' }, json: { input: 'ok' } })
    expect(answer.status).toBe(200)
    expect(answer.json.output).toEqual({ echo: 'ok' })
    // Spared native-only's 410 by its exemption: counted exempt, as a client spared a brownout is.
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/v4gw_legacy_deprecation_total\{tenant="retired",route="POST \/v1\/headless\/runs",action="exempt"\} 1/)
  })
})

describe('SPEC 14 canary by client', () => {
  const invoke = (token: string, stateId: string) =>
    send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'x-tenant-id': 'mixed' }, json: { input: 1, stateId } })

  it('serves a client in allow by V4 and one in deny by the legacy upstream', async () => {
    expect((await invoke(TOKEN, 'a')).headers['x-v4gw-served-by']).toBe('v4')
    expect((await invoke('demo-token-bob', 'a')).headers['x-v4gw-served-by']).toBe('legacy')
  })

  it('keeps every client on one side from request to request while the percentage stays', async () => {
    const tokens = Array.from({ length: 12 }, (_, index) => `canary-client-${index}`)
    for (const token of tokens) {
      const sides = new Set<string>()
      for (let round = 0; round < 3; round++) sides.add(String((await invoke(token, 'state-1')).headers['x-v4gw-served-by']))
      // The V4 simulator does not know these tokens (401 from V4, served by v4) or the legacy upstream answers: one side either way.
      expect(sides.size).toBe(1)
      const expected = clientBucket('canary', 'mixed', fp(token)) < 5_000 ? 'v4' : 'legacy'
      expect([...sides]).toEqual([expected])
    }
  })

  it('keeps a V4 session on the V4 side: the same x-v4-session-id on every call', async () => {
    const first = await invoke(TOKEN, 'sticky')
    const second = await invoke(TOKEN, 'sticky')
    expect([first.headers['x-v4gw-served-by'], second.headers['x-v4gw-served-by']]).toEqual(['v4', 'v4'])
    expect(first.headers['x-v4-session-id']).toBeDefined()
    expect(second.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
  })
})

describe('SPEC 14 metrics', () => {
  it('exports v4gw_migration_stage per route, 1 for its stage and 0 for the others, and v4gw_legacy_requests_total by served_by', async () => {
    await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'old' }, json: { input: 1 } })
    await send(gw.url, '/v1/headless/runs', { headers: { ...runtime, 'x-tenant-id': 'mixed' }, json: { input: 1 } })
    const text = (await send(gw.adminUrl, '/metrics')).text
    expect(text).toContain('v4gw_migration_stage{tenant="old",route="POST /v1/headless/runs",stage="legacy"} 1')
    expect(text).toContain('v4gw_migration_stage{tenant="old",route="POST /v1/headless/runs",stage="translate"} 0')
    expect(text).toContain('v4gw_migration_stage{tenant="mixed",route="POST /v1/headless/runs",stage="translate"} 1')
    expect(text).toContain('v4gw_migration_stage{tenant="mixed",route="POST /v1/runs/invoke",stage="canary"} 1')
    expect(text).toContain('v4gw_migration_stage{tenant="plain",route="POST /v1/headless/runs",stage="translate"} 1')
    expect(text).toMatch(/v4gw_legacy_requests_total\{tenant="old",route="POST \/v1\/headless\/runs",served_by="legacy"\} [1-9]/)
    expect(text).toMatch(/v4gw_legacy_requests_total\{tenant="mixed",route="POST \/v1\/headless\/runs",served_by="v4"\} [1-9]/)
    // A tenant without stages has no served_by to count.
    expect(text).not.toMatch(/v4gw_legacy_requests_total\{tenant="plain"/)
  })

  it('drops the series of a tenant a reload removed', async () => {
    const old = { upstream: { staging: sim.url, legacy: legacy.url }, migration: { stage: 'legacy' } }
    const started = await startGateway({ log: { level: 'silent' }, tenancy: { default: 'old' }, tenants: { old, other: { upstream: { staging: sim.url } } } })
    await send(started.url, '/v1/headless/runs', { json: { input: 1 } })
    expect((await send(started.adminUrl, '/metrics')).text).toMatch(/v4gw_legacy_requests_total\{tenant="old"/)
    await started.gateway.applyConfig(configSchema.parse({ log: { level: 'silent' }, tenants: { other: { upstream: { staging: sim.url } } } }))
    const text = (await send(started.adminUrl, '/metrics')).text
    expect(text).not.toMatch(/tenant="old"/)
    expect(text).toContain('v4gw_migration_stage{tenant="other",route="POST /v1/headless/runs",stage="translate"} 1')
  })
})
