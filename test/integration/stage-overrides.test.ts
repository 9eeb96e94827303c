import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { send, type Answer } from '../helpers/http.js'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { startRedisProxy } from '../helpers/redis-proxy.js'
import { until, useRedisServer } from '../helpers/redis-server.js'
import { startGateway, useGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { runCli } from '../helpers/spawn-cli.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { useTempDir } from '../helpers/temp-dir.js'

/**
 * SPEC 14's rollback: `PUT/DELETE /admin/migration/stage` against a gateway in front of the V4
 * simulator and a recording legacy upstream; the fleet's with several gateways on one real
 * redis-server.
 */
const HOUR = 3_600_000
const ALICE = { authorization: 'Bearer demo-token-alice' }
const ROUTE = 'POST /v1/headless/runs'
/** SPEC 12/14: a change reaches every replica within 2 s. */
const FLEET_DELAY_MS = 2_000

const legacy = useRecordingUpstream((_recorded, response) => {
  response.writeHead(200, { 'content-type': 'application/json' })
  response.end(JSON.stringify({ from: 'legacy' }))
})
const sim = useSimulator()

function stagedTenants(): Record<string, unknown> {
  const upstream = { staging: sim.url, legacy: legacy.url }
  return {
    // Every route in translate, with a legacy upstream to roll back to.
    acme: { upstream, migration: { stage: 'translate' } },
    // A route already in shadow: an override may not move it forward.
    early: { upstream, migration: { stage: 'translate', routes: { [ROUTE]: { stage: 'shadow' } } } },
    // No legacy upstream: nothing to roll back to.
    bare: { upstream: { staging: sim.url }, migration: { stage: 'translate' } }
  }
}

function call(gw: StartedGateway, tenant = 'acme'): Promise<Answer> {
  return send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-tenant-id': tenant }, json: { input: 1 } })
}

function putOverride(gw: StartedGateway, body: Record<string, unknown> | unknown[], headers: Record<string, string> = {}): Promise<Answer> {
  return send(gw.adminUrl, '/admin/migration/stage', { method: 'PUT', headers, json: body })
}

describe('stage overrides on one gateway (SPEC 14)', () => {
  const gw = useGateway(() => ({ log: { level: 'info' }, tenancy: { default: 'acme' }, tenants: stagedTenants() }))

  it('rolls a route back to legacy at once, with reason and a default expiry of 24 h, and writes an admin change line', async () => {
    expect((await call(gw)).headers['x-v4gw-served-by']).toBe('v4')
    const before = Date.now()
    const put = await putOverride(gw, { tenant: 'acme', route: ROUTE, stage: 'legacy', reason: 'INC-42: V4 answers 500' }, { 'x-request-id': 'override-1' })
    expect(put.status).toBe(200)
    expect(put.json).toMatchObject({ override: { tenant: 'acme', route: ROUTE, stage: 'legacy', reason: 'INC-42: V4 answers 500' }, scope: 'replica' })
    const until = Date.parse(put.json.override.until)
    expect(until - before).toBeGreaterThanOrEqual(24 * HOUR - 1_000)
    expect(until - before).toBeLessThanOrEqual(24 * HOUR + 60_000)
    const line = gw.logs.lines().find((entry) => entry.msg === 'admin change' && entry.requestId === 'override-1')
    expect(line).toMatchObject({ level: 40, endpoint: 'PUT /admin/migration/stage', body: { tenant: 'acme', stage: 'legacy', reason: 'INC-42: V4 answers 500' } })

    const served = await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-tenant-id': 'acme', 'x-request-id': 'rolled-back-1' }, json: { input: 1 } })
    expect(served.headers['x-v4gw-served-by']).toBe('legacy')
    expect(served.json).toEqual({ from: 'legacy' })
    // SPEC 17: the access line says which stage served it, and who answered.
    const access = gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === 'rolled-back-1')
    expect(access).toMatchObject({ tenant: 'acme', route: ROUTE, stage: 'legacy', servedBy: 'legacy', status: 200 })
    // Another route of the tenant is not touched.
    const other = await send(gw.url, '/v1/runs/invoke', { headers: { ...ALICE, 'x-tenant-id': 'acme' }, json: { input: 1 } })
    expect(other.headers['x-v4gw-served-by']).toBe('v4')

    const migration = await send(gw.adminUrl, '/admin/migration?tenant=acme')
    expect(migration.json.tenants.acme.routes[ROUTE]).toMatchObject({ stage: 'legacy', stageSource: 'override' })
    expect(migration.json.tenants.acme.routes['POST /v1/runs/invoke']).toMatchObject({ stage: 'translate', stageSource: 'config' })
    expect(migration.json.tenants.acme.overrides).toEqual([expect.objectContaining({ tenant: 'acme', route: ROUTE, stage: 'legacy', suspended: null })])
    expect(await metric(gw, /^v4gw_migration_overrides\{tenant="acme"\} (\d+)$/m)).toBe('1')

    const removed = await send(gw.adminUrl, `/admin/migration/stage?tenant=acme&route=${encodeURIComponent(ROUTE)}`, { method: 'DELETE' })
    expect(removed.json).toMatchObject({ override: { route: ROUTE, stage: 'legacy' }, scope: 'replica' })
    expect((await call(gw)).headers['x-v4gw-served-by']).toBe('v4')
  })

  it('lets a route override win over a tenant override, and removes all of a tenant with all=true', async () => {
    await putOverride(gw, { tenant: 'acme', stage: 'shadow', reason: 'tenant-wide' })
    await putOverride(gw, { tenant: 'acme', route: ROUTE, stage: 'translate', reason: 'this route stays' })
    expect((await call(gw)).headers['x-v4gw-served-by']).toBe('v4')
    const other = await send(gw.url, '/v1/runs/invoke', { headers: { ...ALICE, 'x-tenant-id': 'acme' }, json: { input: 1 } })
    expect(other.headers['x-v4gw-served-by']).toBe('legacy')
    const all = await send(gw.adminUrl, '/admin/migration/stage?tenant=acme&all=true', { method: 'DELETE' })
    expect(all.json.overrides).toHaveLength(2)
    expect((await send(gw.adminUrl, '/admin/migration?tenant=acme')).json.tenants.acme.overrides).toEqual([])
  })

  it('refuses to move a route forward, to a stage needing upstream.legacy without one, and bad bodies, with pointers', async () => {
    const forward = await putOverride(gw, { tenant: 'early', route: ROUTE, stage: 'translate', reason: 'forward' })
    expect(forward.status).toBe(400)
    expect(forward.json.error).toMatchObject({ code: 'INVALID_REQUEST', details: [{ pointer: '/stage' }] })
    // Tenant-wide: refused when any route of the tenant would move forward.
    const tenantWide = await putOverride(gw, { tenant: 'early', stage: 'canary', reason: 'forward for one route' })
    expect(tenantWide.status).toBe(400)
    const noLegacy = await putOverride(gw, { tenant: 'bare', stage: 'legacy', reason: 'nowhere to go' })
    expect(noLegacy.status).toBe(400)
    expect(noLegacy.json.error.details).toEqual([expect.objectContaining({ pointer: '/stage' })])
    const tooLong = await putOverride(gw, { tenant: 'acme', stage: 'legacy', reason: 'r', until: new Date(Date.now() + 31 * 24 * HOUR).toISOString() })
    expect(tooLong.json.error.details).toEqual([expect.objectContaining({ pointer: '/until' })])
    const noReason = await putOverride(gw, { tenant: 'acme', stage: 'legacy' })
    expect(noReason.json.error.details).toEqual([expect.objectContaining({ pointer: '/reason' })])
    const badStage = await putOverride(gw, { tenant: 'acme', stage: 'sideways', reason: 'r' })
    expect(badStage.json.error.details).toEqual([expect.objectContaining({ pointer: '/stage' })])
    // Each unknown member at its own pointer (RFC 6901); a body that is no object at the body's, "".
    const unknown = await putOverride(gw, { tenant: 'acme', stage: 'legacy', reason: 'r', rollback: true, 'a/b': 1 })
    expect(unknown.json.error.details).toEqual([expect.objectContaining({ pointer: '/rollback' }), expect.objectContaining({ pointer: '/a~1b' })])
    const list = await putOverride(gw, [])
    expect(list.json.error.details).toEqual([expect.objectContaining({ pointer: '' })])
    expect((await putOverride(gw, { tenant: 'nope', stage: 'legacy', reason: 'r' })).json.error.code).toBe('TENANT_UNKNOWN')
    expect((await putOverride(gw, { tenant: 'acme', route: 'POST /nope', stage: 'legacy', reason: 'r' })).json.error.code).toBe('ROUTE_NOT_FOUND')
    const form = await send(gw.adminUrl, '/admin/migration/stage', { method: 'PUT', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'tenant=acme' })
    expect(form.status).toBe(415)
    // An equal stage is allowed (SPEC 14: earlier or equal).
    expect((await putOverride(gw, { tenant: 'early', route: ROUTE, stage: 'shadow', reason: 'same' })).status).toBe(200)
    await send(gw.adminUrl, '/admin/migration/stage?tenant=early&all=true', { method: 'DELETE' })
  })

  it('answers a removal of an unknown tenant or route 404, whatever else of the tenant is in force', async () => {
    expect((await putOverride(gw, { tenant: 'early', stage: 'legacy', reason: 'tenant-wide' })).status).toBe(200)
    const typo = await send(gw.adminUrl, `/admin/migration/stage?tenant=early&route=${encodeURIComponent('POST /v1/typo')}`, { method: 'DELETE' })
    expect(typo.status).toBe(404)
    expect(typo.json.error.code).toBe('ROUTE_NOT_FOUND')
    expect((await send(gw.adminUrl, '/admin/migration/stage?tenant=nope', { method: 'DELETE' })).json.error.code).toBe('TENANT_UNKNOWN')
    // A known route without an override of its own: nothing removed, the tenant's kept.
    const none = await send(gw.adminUrl, `/admin/migration/stage?tenant=early&route=${encodeURIComponent(ROUTE)}`, { method: 'DELETE' })
    expect(none.status).toBe(200)
    expect(none.json.override).toBeNull()
    const removed = await send(gw.adminUrl, '/admin/migration/stage?tenant=early', { method: 'DELETE' })
    expect(removed.json.override).toMatchObject({ tenant: 'early', route: null, stage: 'legacy' })
  })
})

/** One tenant, acme, in `stage`, with or without its legacy upstream: the file a reload reads. */
function acmeIn(stage: string, withLegacy: boolean): Record<string, unknown> {
  return {
    log: { level: 'silent' },
    tenancy: { default: 'acme' },
    tenants: { acme: { upstream: withLegacy ? { staging: sim.url, legacy: legacy.url } : { staging: sim.url }, migration: { stage } } }
  }
}

describe('an override the config no longer allows (SPEC 14: suspended, never misapplied)', () => {
  const dir = useTempDir('v4gw-overrides-')

  it('is suspended by a reload that removes the legacy upstream, and applies again when it comes back', async () => {
    const configPath = join(dir.path, 'gateway.yaml')
    const config = (withLegacy: boolean): Record<string, unknown> => acmeIn('translate', withLegacy)
    await writeFile(configPath, stringify(config(true)))
    const gw = await startGateway(config(true), { configPath })
    await putOverride(gw, { tenant: 'acme', route: ROUTE, stage: 'legacy', reason: 'rollback' })
    expect((await call(gw)).headers['x-v4gw-served-by']).toBe('legacy')

    await writeFile(configPath, stringify(config(false)))
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST' })).status).toBe(200)
    expect((await call(gw)).headers['x-v4gw-served-by']).toBe('v4')
    const listed = (await send(gw.adminUrl, '/admin/migration?tenant=acme')).json.tenants.acme
    expect(listed.overrides).toEqual([expect.objectContaining({ route: ROUTE, stage: 'legacy', suspended: expect.stringContaining('upstream.legacy') })])
    expect(listed.routes[ROUTE]).toMatchObject({ stage: 'translate', stageSource: 'config' })

    await writeFile(configPath, stringify(config(true)))
    await send(gw.adminUrl, '/admin/reload', { method: 'POST' })
    expect((await call(gw)).headers['x-v4gw-served-by']).toBe('legacy')
  })

  // SPEC 14: route override, tenant override, route config, …: a suspended one leaves the next in force.
  it('leaves the tenant override in force when the route override is suspended', async () => {
    const configPath = join(dir.path, 'gateway-native-only.yaml')
    const config = (withLegacy: boolean): Record<string, unknown> => acmeIn('native-only', withLegacy)
    await writeFile(configPath, stringify(config(true)))
    const gw = await startGateway(config(true), { configPath })
    expect((await call(gw)).status).toBe(410)
    // The tenant rolled back to translate, then one route further, to legacy.
    expect((await putOverride(gw, { tenant: 'acme', stage: 'translate', reason: 'tenant rollback' })).status).toBe(200)
    expect((await putOverride(gw, { tenant: 'acme', route: ROUTE, stage: 'legacy', reason: 'route rollback' })).status).toBe(200)
    expect((await call(gw)).headers['x-v4gw-served-by']).toBe('legacy')

    // Without the legacy upstream the route's override is suspended; the tenant's still holds.
    await writeFile(configPath, stringify(config(false)))
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST' })).status).toBe(200)
    const served = await call(gw)
    expect(served.status).toBe(200)
    expect(served.headers['x-v4gw-served-by']).toBe('v4')
    const listed = (await send(gw.adminUrl, '/admin/migration?tenant=acme')).json.tenants.acme
    expect(listed.routes[ROUTE]).toMatchObject({ stage: 'translate', stageSource: 'override' })
    expect(listed.overrides).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ route: ROUTE, stage: 'legacy', suspended: expect.stringContaining('upstream.legacy') }),
        expect.objectContaining({ route: null, stage: 'translate', suspended: null })
      ])
    )
  })
})

describe('overrides and pauses whose tenant or route a reload removed (SPEC 13, 14: suspended, listed, removable)', () => {
  const dir = useTempDir('v4gw-orphans-')
  const INVOKE = 'POST /v1/runs/invoke'

  function config(withRemoved: boolean): Record<string, unknown> {
    const upstream = { staging: sim.url, legacy: legacy.url }
    const routes = [{ method: 'POST', path: '/v1/headless/runs', action: 'execute' }, ...(withRemoved ? [{ method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/stateId' }] : [])]
    return {
      log: { level: 'silent' },
      tenancy: { default: 'acme' },
      tenants: { acme: { upstream, legacy: { routes } }, ...(withRemoved ? { old: { upstream, legacy: { routes } } } : {}) }
    }
  }

  it('lists each with why it is not applied, and lets it be removed, as long as it is in force', async () => {
    const configPath = join(dir.path, 'gateway.yaml')
    await writeFile(configPath, stringify(config(true)))
    const gw = await startGateway(config(true), { configPath })
    expect((await putOverride(gw, { tenant: 'old', stage: 'legacy', reason: 'old rollback' })).status).toBe(200)
    const until = new Date(Date.now() + HOUR).toISOString()
    expect((await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', route: INVOKE, until, reason: 'route pause' } })).status).toBe(200)
    expect((await send(gw.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'old', until, reason: 'tenant pause' } })).status).toBe(200)
    expect((await send(gw.adminUrl, '/admin/migration')).json.suspended).toEqual({ overrides: [], brownoutPauses: [] })

    await writeFile(configPath, stringify(config(false)))
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST' })).status).toBe(200)
    const listed = (await send(gw.adminUrl, '/admin/migration')).json
    expect(listed.tenants).not.toHaveProperty('old')
    expect(listed.suspended.overrides).toEqual([expect.objectContaining({ tenant: 'old', route: null, stage: 'legacy', suspended: 'the tenant is not in the running config' })])
    expect(listed.suspended.brownoutPauses).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ tenant: 'acme', route: INVOKE, reason: 'route pause', suspended: 'the route is not in the running config' }),
        expect.objectContaining({ tenant: 'old', route: null, reason: 'tenant pause', suspended: 'the tenant is not in the running config' })
      ])
    )
    expect(listed.suspended.brownoutPauses).toHaveLength(2)
    // One tenant asked for: only what is its own.
    expect((await send(gw.adminUrl, '/admin/migration?tenant=acme')).json.suspended).toEqual({ overrides: [], brownoutPauses: [expect.objectContaining({ tenant: 'acme', route: INVOKE })] })

    const resumed = await send(gw.adminUrl, `/admin/brownouts/pause?tenant=acme&route=${encodeURIComponent(INVOKE)}`, { method: 'DELETE' })
    expect(resumed.status).toBe(200)
    expect(resumed.json.pause).toMatchObject({ tenant: 'acme', route: INVOKE })
    expect((await send(gw.adminUrl, '/admin/brownouts/pause?tenant=old', { method: 'DELETE' })).json.pause).toMatchObject({ tenant: 'old', route: null })
    expect((await send(gw.adminUrl, '/admin/migration/stage?tenant=old', { method: 'DELETE' })).json.override).toMatchObject({ tenant: 'old', stage: 'legacy' })
    expect((await send(gw.adminUrl, '/admin/migration')).json.suspended).toEqual({ overrides: [], brownoutPauses: [] })
    // Once gone, the route and tenant are unknown again.
    expect((await send(gw.adminUrl, `/admin/brownouts/pause?tenant=acme&route=${encodeURIComponent(INVOKE)}`, { method: 'DELETE' })).json.error.code).toBe('ROUTE_NOT_FOUND')
    expect((await send(gw.adminUrl, '/admin/brownouts/pause?tenant=old', { method: 'DELETE' })).json.error.code).toBe('TENANT_UNKNOWN')
  })
})

describe('a tenant-wide override a reload disallows on one route (SPEC 14: each route judged alone)', () => {
  const dir = useTempDir('v4gw-partial-')

  it('still applies on the other routes, and the tenant’s stage says so, with the skipped route named', async () => {
    const routes = [{ method: 'POST', path: '/v1/headless/runs', action: 'execute' }, { method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/stateId' }]
    const config = (invokeStage: string | undefined, tenantStage = 'translate'): Record<string, unknown> => ({
      log: { level: 'silent' },
      tenancy: { default: 'acme' },
      tenants: { acme: { upstream: { staging: sim.url, legacy: legacy.url }, legacy: { routes }, migration: { stage: tenantStage, ...(invokeStage === undefined ? {} : { routes: { 'POST /v1/runs/invoke': { stage: invokeStage } } }) } } }
    })
    const configPath = join(dir.path, 'gateway.yaml')
    await writeFile(configPath, stringify(config(undefined)))
    const gw = await startGateway(config(undefined), { configPath })
    expect((await putOverride(gw, { tenant: 'acme', stage: 'shadow', reason: 'tenant rollback' })).status).toBe(200)
    await writeFile(configPath, stringify(config('legacy')))
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST' })).status).toBe(200)
    const listed = (await send(gw.adminUrl, '/admin/migration?tenant=acme')).json.tenants.acme
    expect(listed.routes[ROUTE]).toMatchObject({ stage: 'shadow', stageSource: 'override' })
    expect(listed.routes['POST /v1/runs/invoke']).toMatchObject({ stage: 'legacy', stageSource: 'config' })
    expect(listed.stage).toBe('shadow')
    expect(listed.overrides).toEqual([expect.objectContaining({ route: null, stage: 'shadow', suspended: 'not applied to POST /v1/runs/invoke: the config sets an earlier stage' })])
    expect((await call(gw)).headers['x-v4gw-served-by']).toBe('legacy')

    // The tenant moved back to legacy, one route kept in translate: the override applies on that
    // route only, and the tenant's stage (a route without its own) is its configured legacy.
    await writeFile(configPath, stringify(config('translate', 'legacy')))
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST' })).status).toBe(200)
    const moved = (await send(gw.adminUrl, '/admin/migration?tenant=acme')).json.tenants.acme
    expect(moved.stage).toBe('legacy')
    expect(moved.routes['POST /v1/runs/invoke']).toMatchObject({ stage: 'shadow', stageSource: 'override' })
    expect(moved.routes[ROUTE]).toMatchObject({ stage: 'legacy', stageSource: 'config' })
  })
})

describe('a proxy route under a tenant-wide shadow override (docs/decisions.md)', () => {
  const proxied = useGateway(() => ({
    log: { level: 'silent' },
    tenancy: { default: 'acme' },
    tenants: {
      acme: {
        upstream: { staging: sim.url, legacy: legacy.url },
        legacy: { routes: [{ method: 'POST', path: '/v1/headless/runs', action: 'execute' }, { method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }] },
        migration: { stage: 'translate', shadow: { percent: 100 } }
      }
    }
  }))

  it('is accepted with the tenant\'s other routes, serves the proxy route from the legacy upstream, and compares only the translated route', async () => {
    expect((await putOverride(proxied, { tenant: 'acme', stage: 'shadow', reason: 'tenant rollback' })).status).toBe(200)
    const before = legacy.requests.length
    const policies = await send(proxied.url, '/v1/policies?team=a', { headers: ALICE })
    expect(policies.status).toBe(200)
    expect(policies.headers['x-v4gw-served-by']).toBe('legacy')
    expect(policies.json).toEqual({ from: 'legacy' })
    // The client's path, not the rewritten one (SPEC 14: the legacy upstream gets what the client sent).
    expect(legacy.requests.slice(before).map((request) => request.url)).toEqual(['/v1/policies?team=a'])
    expect((await call(proxied)).headers['x-v4gw-served-by']).toBe('legacy')
    const listed = (await send(proxied.adminUrl, '/admin/migration?tenant=acme')).json.tenants.acme
    expect(listed.routes['GET /v1/policies']).toMatchObject({ stage: 'shadow', stageSource: 'override' })
    // The translated route's comparison is counted; the proxy route has none.
    await until(async () => /^v4gw_shadow_comparisons_total\{[^}]*route="POST \/v1\/headless\/runs"[^}]*\} [1-9]/m.test((await send(proxied.adminUrl, '/metrics')).text), 5_000)
    expect((await send(proxied.adminUrl, '/metrics')).text).not.toMatch(/^v4gw_shadow_comparisons_total\{[^}]*route="GET \/v1\/policies"/m)
  })
})

describe('stage overrides shared by the fleet through Redis (SPEC 14)', () => {
  const redis = useRedisServer()
  const replica = (): Promise<StartedGateway> =>
    startGateway({ log: { level: 'silent' }, store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'overrides:' } }, tenancy: { default: 'acme' }, tenants: stagedTenants() })

  it('reaches every replica within 2 s, survives a restart, and is written back after an outage', async () => {
    const [a, b] = [await replica(), await replica()]
    const put = await putOverride(a, { tenant: 'acme', route: ROUTE, stage: 'legacy', reason: 'fleet rollback' })
    expect(put.json.scope).toBe('fleet')
    await until(async () => (await call(b)).headers['x-v4gw-served-by'] === 'legacy', FLEET_DELAY_MS, 50)

    await a.close()
    await b.close()
    const restarted = await replica()
    expect((await call(restarted)).headers['x-v4gw-served-by']).toBe('legacy')

    // Taken while Redis is down: this replica only, then the fleet's once Redis answers again.
    await redis.kill()
    await until(async () => (await send(restarted.adminUrl, '/readyz')).json?.sessionStore?.redis === 'down')
    const local = await putOverride(restarted, { tenant: 'acme', route: 'POST /v1/runs/invoke', stage: 'legacy', reason: 'during the outage' })
    expect(local.json.scope).toBe('local')
    await redis.restart()
    await until(async () => (await redis.client().hlen('overrides:f:overrides')) === 2, 3 * FLEET_DELAY_MS, 50)
    const late = await replica()
    const invoke = await send(late.url, '/v1/runs/invoke', { headers: { ...ALICE, 'x-tenant-id': 'acme' }, json: { input: 1 } })
    expect(invoke.headers['x-v4gw-served-by']).toBe('legacy')
  })
})

describe('v4gw explain --config with store: redis (SPEC 14: the decision the fleet makes)', () => {
  const redis = useRedisServer()
  const dir = useTempDir('v4gw-explain-overrides-')

  it('reads the fleet\'s stage overrides from Redis: a rolled-back route is explained as served by the legacy upstream', async () => {
    const config = { log: { level: 'silent' }, store: { kind: 'redis', redis: { url: redis.url, keyPrefix: 'explained:' } }, tenancy: { default: 'acme' }, tenants: stagedTenants() }
    const configPath = join(dir.path, 'gateway.yaml')
    await writeFile(configPath, stringify(config))
    const explain = async (): Promise<{ migration: { stage: string; stageSource: string; side: string } }> => {
      const run = await runCli(['explain', '--config', configPath, 'POST', '/v1/headless/runs', '--header', 'authorization:Bearer demo-token-alice', '--body', '{"input":1}'])
      expect(run.code).toBe(0)
      return JSON.parse(run.stdout) as { migration: { stage: string; stageSource: string; side: string } }
    }
    expect((await explain()).migration).toMatchObject({ stage: 'translate', side: 'v4' })
    const gw = await startGateway(config)
    expect((await putOverride(gw, { tenant: 'acme', route: ROUTE, stage: 'legacy', reason: 'fleet rollback' })).json.scope).toBe('fleet')
    expect((await explain()).migration).toMatchObject({ stage: 'legacy', stageSource: 'override', side: 'legacy' })
  }, 60_000)

  it('says when the store does not answer that what the fleet decided beyond the config is unknown', async () => {
    const configPath = join(dir.path, 'unreachable.yaml')
    await writeFile(configPath, stringify({ store: { kind: 'redis', redis: { url: 'redis://127.0.0.1:1', keyPrefix: 'x:' } }, tenancy: { default: 'acme' }, tenants: stagedTenants() }))
    const run = await runCli(['explain', '--config', configPath, 'POST', '/v1/headless/runs', '--header', 'authorization:Bearer demo-token-alice', '--body', '{"input":1}'])
    expect(run.code).toBe(0)
    expect(run.stderr).toContain("store redis does not answer: the fleet's stage overrides and brownout pauses are unknown")
    expect(JSON.parse(run.stdout).migration).toMatchObject({ stage: 'translate', stageSource: 'config' })
  }, 60_000)

  it('says so too when the store is connected but does not answer the read of the records (hung past the command timeout)', async () => {
    const proxy = await startRedisProxy(redis.url)
    proxy.hangAt(/HGETALL/i)
    const configPath = join(dir.path, 'hung.yaml')
    await writeFile(configPath, stringify({ store: { kind: 'redis', redis: { url: proxy.url, keyPrefix: 'hung:' } }, tenancy: { default: 'acme' }, tenants: stagedTenants() }))
    const run = await runCli(['explain', '--config', configPath, 'POST', '/v1/headless/runs', '--header', 'authorization:Bearer demo-token-alice', '--body', '{"input":1}'])
    expect(run.code).toBe(0)
    expect(run.stderr).toContain("store redis does not answer: the fleet's stage overrides and brownout pauses are unknown")
    expect(JSON.parse(run.stdout).migration).toMatchObject({ stage: 'translate', stageSource: 'config' })
  }, 60_000)
})

async function metric(gw: StartedGateway, pattern: RegExp): Promise<string | undefined> {
  return pattern.exec((await send(gw.adminUrl, '/metrics')).text)?.[1]
}
