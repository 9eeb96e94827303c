import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { configSchema } from '../../src/config/schema.js'
import { deepFreeze } from '../../src/util/deep-freeze.js'
import { answerJson, startFaultUpstream, type FaultExchange, type FaultUpstream } from '../helpers/fault-upstream.js'
import { send, type Answer } from '../helpers/http.js'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { startGateway, testConfig, useGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

/**
 * SPEC 13 across SPEC 14's stages and SPEC 16's replays, over real sockets: the deprecation
 * headers on what the legacy upstream serves, brownouts before any side or stored answer, and a
 * pause that stops brownouts but never undoes stage native-only. Dates are computed from now.
 */
const HOUR = 3_600_000
const DAY = 24 * HOUR
const NOW = Date.now()
const iso = (ms: number): string => new Date(ms).toISOString()
const TOKEN = 'demo-token-alice'
const ALICE = { authorization: `Bearer ${TOKEN}` }
const fp = (token: string): string => `fp:${createHash('sha256').update(token).digest('hex').slice(0, 16)}`

const DATE = iso(NOW - 30 * DAY)
const SUNSET = iso(NOW + 30 * DAY)
/** A window open now, for every client (SPEC 13: `clients: 100`), on short notice. */
const OPEN_WINDOW = { windows: [{ start: iso(NOW - HOUR), end: iso(NOW + HOUR) }], clients: 100, minNoticeMs: 0 }

function deprecation(brownouts: Record<string, unknown> | null = null): Record<string, unknown> {
  return { date: DATE, sunset: SUNSET, link: 'https://docs.example.com/v4', sunsetLink: 'https://docs.example.com/sunset-policy', brownouts }
}

/** What src/tenancy/deprecation-policy.ts writes: RFC 9745, RFC 8594, RFC 8288. */
const DEPRECATION = `@${Math.floor(Date.parse(DATE) / 1000)}`
const SUNSET_HEADER = new Date(SUNSET).toUTCString()
const FIXED_LINKS = '<https://docs.example.com/v4>; rel="deprecation", <https://docs.example.com/sunset-policy>; rel="sunset"'

function expectDeprecationHeaders(answer: Answer, successor: string): void {
  expect(answer.headers.deprecation).toBe(DEPRECATION)
  expect(answer.headers.sunset).toBe(SUNSET_HEADER)
  expect(answer.headers.link).toBe(`${FIXED_LINKS}, <${successor}>; rel="successor-version"`)
}

describe('deprecation on the legacy upstream\'s answers, stages legacy, shadow and canary (SPEC 13, 14)', () => {
  const legacy = useRecordingUpstream((recorded, response) => {
    response.writeHead(200, { 'content-type': 'application/json', 'x-legacy': 'yes' })
    response.end(JSON.stringify({ from: 'legacy', url: recorded.url }))
  })
  const sim = useSimulator()
  const STAGES = { legacy: { stage: 'legacy' }, shadow: { stage: 'shadow' }, canary: { stage: 'canary', canary: { percent: 50, deny: [fp(TOKEN)] } } }
  const gw = useGateway(() => {
    const upstream = { staging: sim.url, legacy: legacy.url }
    const tenants: Record<string, unknown> = {}
    for (const [name, migration] of Object.entries(STAGES)) {
      tenants[name] = { upstream, legacy: { deprecation: deprecation() }, migration }
      tenants[`${name}-brownout`] = { upstream, legacy: { deprecation: deprecation(OPEN_WINDOW) }, migration }
    }
    return { log: { level: 'silent' }, tenancy: { default: 'legacy' }, tenants }
  })

  const call = (tenant: string, path = '/v1/headless/runs'): Promise<Answer> =>
    send(gw.url, path, { headers: { ...ALICE, 'x-tenant-id': tenant }, json: { input: 1 } })

  it.each(Object.keys(STAGES))('stage %s: a 200 of upstream.legacy comes back unchanged but for Deprecation, Sunset and Link, served by legacy', async (stage) => {
    const before = legacy.requests.length
    const answer = await call(stage)
    expect(answer.status).toBe(200)
    expect(answer.text).toBe(JSON.stringify({ from: 'legacy', url: '/v1/headless/runs' }))
    expect(answer.headers['x-legacy']).toBe('yes')
    expect(answer.headers['x-v4gw-served-by']).toBe('legacy')
    expectDeprecationHeaders(answer, '/v4/execute')
    expect(legacy.requests.length).toBe(before + 1)
  })

  it('names /v4/sessions.start as the successor of a session-execute route the legacy upstream serves', async () => {
    const answer = await call('legacy', '/v1/runs/invoke')
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4gw-served-by']).toBe('legacy')
    expectDeprecationHeaders(answer, '/v4/sessions.start')
  })

  it.each(Object.keys(STAGES))('stage %s: an open brownout window answers 410 LEGACY_BROWNOUT with the headers, and the legacy upstream receives nothing', async (stage) => {
    const before = legacy.requests.length
    const answer = await call(`${stage}-brownout`)
    expect(answer.status).toBe(410)
    expect(answer.json.error).toMatchObject({ code: 'LEGACY_BROWNOUT', migration: { windowEnd: OPEN_WINDOW.windows[0]?.end, sunset: SUNSET, successor: '/v4/execute' } })
    expect(answer.headers['x-v4gw-served-by']).toBe('gateway')
    expectDeprecationHeaders(answer, '/v4/execute')
    expect(legacy.requests.length).toBe(before)
  })
})

/** The V4 execution calls that reached the upstream. */
function executions(upstream: FaultUpstream): FaultExchange[] {
  return upstream.exchanges.filter((exchange) => exchange.url === '/v4/execute')
}

describe('a brownout before a stored idempotent answer (SPEC 13\'s order before SPEC 16)', () => {
  it('answers 410 in the window instead of replaying, and replays the first 200 once the brownout is paused or the window gone, having executed once', async () => {
    const upstream = await startFaultUpstream((exchange) => answerJson(exchange, 200, { output: 'ran', meta: { executionId: 'ex-1' } }))
    const raw = (windows: unknown[]): Record<string, unknown> =>
      testConfig(upstream.url, {
        log: { level: 'silent' },
        tenants: { acme: { upstream: { staging: upstream.url }, legacy: { idempotency: {}, deprecation: deprecation({ windows, clients: 100, minNoticeMs: 0 }) }, migration: { stage: 'translate' } } }
      })
    // The window opens later: two hours from now.
    const later = [{ start: iso(NOW + 2 * HOUR), end: iso(NOW + 3 * HOUR) }]
    const gw = await startGateway(raw(later))
    const reload = (windows: unknown[]) => gw.gateway.applyConfig(deepFreeze(configSchema.parse(raw(windows))))
    const keyed = { ...ALICE, 'idempotency-key': 'k1' }
    const again = (): Promise<Answer> => send(gw.url, '/v1/headless/runs', { headers: keyed, json: { input: 1 } })

    const first = await again()
    expect(first.status).toBe(200)
    expect(first.headers['idempotent-replayed']).toBeUndefined()
    expect(executions(upstream)).toHaveLength(1)

    // The window opens: the same window, now containing the present.
    await reload([{ start: iso(NOW - HOUR), end: iso(NOW + 3 * HOUR) }])
    const browned = await again()
    expect(browned.status).toBe(410)
    expect(browned.json.error.code).toBe('LEGACY_BROWNOUT')
    expect(browned.headers['idempotent-replayed']).toBeUndefined()
    expectDeprecationHeaders(browned, '/v4/execute')

    // A pause stops the brownout: the stored answer is replayed, not run again.
    const paused = await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', until: iso(Date.now() + HOUR), reason: 'let retries through' } })
    expect(paused.status).toBe(200)
    const replayed = await again()
    expect(replayed.status).toBe(200)
    expect(replayed.headers['idempotent-replayed']).toBe('true')
    expect(replayed.text).toBe(first.text)
    expect(executions(upstream)).toHaveLength(1)

    // Resumed, the window refuses again; a reload that closes it lets the same key replay again.
    await send(gw.adminUrl, '/admin/brownouts/pause?tenant=acme', { method: 'DELETE' })
    expect((await again()).json.error.code).toBe('LEGACY_BROWNOUT')
    await reload(later)
    const afterWindow = await again()
    expect(afterWindow.status).toBe(200)
    expect(afterWindow.headers['idempotent-replayed']).toBe('true')
    expect(afterWindow.text).toBe(first.text)
    expect(executions(upstream)).toHaveLength(1)
  })
})

describe('a pause does not undo stage native-only; a stage override does (SPEC 13, 14)', () => {
  const legacy = useRecordingUpstream()
  const sim = useSimulator()
  const gw = useGateway(() => ({
    log: { level: 'silent' },
    tenancy: { default: 'retired' },
    tenants: {
      // An open brownout window too, so that the pause has something of its own to stop.
      retired: { upstream: { staging: sim.url, legacy: legacy.url }, legacy: { deprecation: deprecation(OPEN_WINDOW) }, migration: { stage: 'native-only' } }
    }
  }))
  const call = (): Promise<Answer> => send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 'back' } })

  it('keeps answering 410 LEGACY_GONE while the tenant is paused, forwarding nothing, and serves from V4 after an override to translate', async () => {
    sim.simulator.resetCalls()
    const gone = await call()
    expect(gone.status).toBe(410)
    expect(gone.json.error.code).toBe('LEGACY_GONE')

    const paused = await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'retired', until: iso(Date.now() + HOUR), reason: 'incident 9' } })
    expect(paused.status).toBe(200)
    expect(paused.json).toMatchObject({ pause: { tenant: 'retired', route: null, reason: 'incident 9' } })

    const stillGone = await call()
    expect(stillGone.status).toBe(410)
    expect(stillGone.json.error.code).toBe('LEGACY_GONE')
    expectDeprecationHeaders(stillGone, '/v4/execute')
    expect(sim.simulator.calls).toEqual([])
    expect(legacy.requests).toEqual([])

    const override = await send(gw.adminUrl, '/admin/migration/stage', { method: 'PUT', json: { tenant: 'retired', stage: 'translate', reason: 'bring it back' } })
    expect(override.status).toBe(200)
    // Translated now; the window is still open, but paused.
    const served = await call()
    expect(served.status).toBe(200)
    expect(served.json.output).toEqual({ echo: 'back' })
    expect(served.headers['x-v4gw-served-by']).toBe('v4')
    expectDeprecationHeaders(served, '/v4/execute')
  })
})
