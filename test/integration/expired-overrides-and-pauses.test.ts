import { describe, expect, it } from 'vitest'
import { configSchema } from '../../src/config/schema.js'
import { send, type Answer } from '../helpers/http.js'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { startGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { until } from '../helpers/until.js'

/**
 * SPEC 13 and 14 with `store: memory`: an override or a pause whose `until` has passed is gone
 * everywhere it was shown (`/admin/migration`, its gauges, `DELETE …&all=true`), not only from
 * the request path. The admin API takes any `until` ahead, so each record here lives a few
 * seconds, and the test waits for the clock to pass it.
 */
const HOUR = 3_600_000
const DAY = 24 * HOUR
const iso = (ms: number): string => new Date(ms).toISOString()
const ALICE = { authorization: 'Bearer demo-token-alice' }
const ROUTE = 'POST /v1/headless/runs'
const INVOKE = 'POST /v1/runs/invoke'
/** Long enough for every record to be set and seen in force before it ends, on a busy machine. */
const LIFETIME_MS = 6_000

const legacy = useRecordingUpstream((_recorded, response) => {
  response.writeHead(200, { 'content-type': 'application/json' })
  response.end(JSON.stringify({ from: 'legacy' }))
})
const sim = useSimulator()

/** acme in translate with a brownout open now on INVOKE only; `old` only until the reload that removes it. */
function config(withOld: boolean): Record<string, unknown> {
  const now = Date.now()
  const upstream = { staging: sim.url, legacy: legacy.url }
  return {
    log: { level: 'silent' },
    tenancy: { default: 'acme' },
    tenants: {
      acme: {
        upstream,
        legacy: { deprecation: { date: iso(now - 30 * DAY), sunset: iso(now + 30 * DAY), brownouts: { windows: [{ start: iso(now - HOUR), end: iso(now + 6 * HOUR) }] } } },
        migration: { stage: 'translate', routes: { [ROUTE]: { deprecation: { brownouts: null } } } }
      },
      ...(withOld ? { old: { upstream, migration: { stage: 'translate' } } } : {})
    }
  }
}

function headless(gw: StartedGateway): Promise<Answer> {
  return send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
}

function invoke(gw: StartedGateway): Promise<Answer> {
  return send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'expiry' } })
}

async function metric(gw: StartedGateway, pattern: RegExp): Promise<string | undefined> {
  return pattern.exec((await send(gw.adminUrl, '/metrics')).text)?.[1]
}

describe('overrides and pauses past their until, with store memory (SPEC 13, 14: an expired one is removed)', () => {
  it('leave /admin/migration, the gauges and DELETE all=true, and the configured stage and brownouts serve again', async () => {
    const gw = await startGateway(config(true))
    const expiresAt = Date.now() + LIFETIME_MS
    const untilIso = iso(expiresAt)
    const put = (body: Record<string, unknown>): Promise<Answer> => send(gw.adminUrl, '/admin/migration/stage', { method: 'PUT', json: { ...body, until: untilIso } })
    const pause = (body: Record<string, unknown>): Promise<Answer> => send(gw.adminUrl, '/admin/brownouts/pause', { json: { ...body, until: untilIso } })
    expect((await put({ tenant: 'acme', stage: 'legacy', reason: 'tenant rollback' })).status).toBe(200)
    expect((await put({ tenant: 'acme', route: ROUTE, stage: 'legacy', reason: 'route rollback' })).status).toBe(200)
    expect((await put({ tenant: 'old', stage: 'legacy', reason: 'old rollback' })).status).toBe(200)
    expect((await pause({ tenant: 'acme', reason: 'tenant pause' })).status).toBe(200)
    expect((await pause({ tenant: 'acme', route: INVOKE, reason: 'route pause' })).status).toBe(200)
    expect((await pause({ tenant: 'old', reason: 'old pause' })).status).toBe(200)
    // `old` leaves the config: its override and pause are listed under `suspended` while in force.
    await gw.gateway.applyConfig(configSchema.parse(config(false)))

    // In force: every place that shows them does (else the checks below would prove nothing).
    const during = (await send(gw.adminUrl, '/admin/migration')).json
    expect(during.tenants.acme).toMatchObject({ stage: 'legacy', brownoutPause: { reason: 'tenant pause' } })
    expect(during.tenants.acme.overrides).toHaveLength(2)
    expect(during.tenants.acme.routes[INVOKE].brownoutPause).toMatchObject({ reason: 'route pause' })
    expect(during.suspended.overrides).toEqual([expect.objectContaining({ tenant: 'old', reason: 'old rollback' })])
    expect(during.suspended.brownoutPauses).toEqual([expect.objectContaining({ tenant: 'old', reason: 'old pause' })])
    expect(await metric(gw, /^v4gw_migration_overrides\{tenant="acme"\} (\d+)$/m)).toBe('2')
    expect(await metric(gw, /^v4gw_brownouts_paused\{tenant="acme"\} (\d+)$/m)).toBe('1')
    expect((await headless(gw)).headers['x-v4gw-served-by']).toBe('legacy')
    expect((await invoke(gw)).headers['x-v4gw-served-by']).toBe('legacy')

    // Waiting for the clock only: the gateway reads the same one, so nothing else needs to happen.
    await until(() => Date.now() > expiresAt, LIFETIME_MS + 5_000, 50)

    const after = (await send(gw.adminUrl, '/admin/migration')).json
    expect(after.tenants.acme.overrides).toEqual([])
    expect(after.tenants.acme.stage).toBe('translate')
    expect(after.tenants.acme.brownoutPause).toBeNull()
    expect(after.tenants.acme.routes[INVOKE].brownoutPause).toBeNull()
    expect(after.tenants.acme.routes[ROUTE]).toMatchObject({ stage: 'translate', stageSource: 'config' })
    expect(after.suspended).toEqual({ overrides: [], brownoutPauses: [] })
    expect(await metric(gw, /^v4gw_migration_overrides\{tenant="acme"\} (\d+)$/m)).toBe('0')
    expect(await metric(gw, /^v4gw_brownouts_paused\{tenant="acme"\} (\d+)$/m)).toBe('0')
    // Nothing of acme's left to remove; `old`'s ended with its override, so it is unknown again.
    expect((await send(gw.adminUrl, '/admin/migration/stage?tenant=acme&all=true', { method: 'DELETE' })).json).toEqual({ overrides: [], scope: 'replica' })
    const oldAll = await send(gw.adminUrl, '/admin/migration/stage?tenant=old&all=true', { method: 'DELETE' })
    expect(oldAll.status).toBe(404)
    expect(oldAll.json.error.code).toBe('TENANT_UNKNOWN')
    expect((await send(gw.adminUrl, '/admin/brownouts/pause?tenant=old', { method: 'DELETE' })).json.error.code).toBe('TENANT_UNKNOWN')

    // Traffic: the configured stage serves again, and the brownout the pauses held back is back.
    const before = legacy.requests.length
    expect((await headless(gw)).headers['x-v4gw-served-by']).toBe('v4')
    const brownout = await invoke(gw)
    expect(brownout.status).toBe(410)
    expect(brownout.json.error.code).toBe('LEGACY_BROWNOUT')
    expect(legacy.requests.length).toBe(before)
  })
})
