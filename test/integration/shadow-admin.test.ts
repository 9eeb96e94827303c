import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'

const EXECUTE = 'POST /v1/headless/runs'
const RUN_INVOKE = 'POST /v1/runs/invoke'

/** SPEC 15 "Results": GET and DELETE /admin/shadow, and v4gw_shadow_comparisons_total. */
describe('/admin/shadow', () => {
  const gw = useGateway(() =>
    testConfig('http://127.0.0.1:9', {
      tenants: {
        acme: { upstream: { staging: 'http://127.0.0.1:9' } },
        beta: {
          upstream: { staging: 'http://127.0.0.1:9' },
          legacy: { routes: [{ method: 'POST', path: '/v1/run', action: 'execute' }, { method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }] }
        }
      }
    })
  )

  function record(tenant: string, route: string, outcome: 'match' | 'mismatch' | 'dropped', pointers?: string[]): void {
    gw.gateway.shadow.record({ tenant, route, outcome, requestId: `req-${outcome}`, atMs: Date.now(), primaryStatus: 200, candidateStatus: outcome === 'mismatch' ? 500 : 200, pointers })
  }

  it('answers every execute and session-execute route of every tenant, with counts, the last 24 h, top pointers and samples', async () => {
    record('acme', EXECUTE, 'match')
    record('acme', EXECUTE, 'mismatch', ['#status', '/output/~h1a2b3c4d'])
    const answer = await send(gw.adminUrl, '/admin/shadow')
    expect(answer.status).toBe(200)
    expect(answer.json).toMatchObject({ schemaVersion: 1, scope: 'replica' })
    expect(typeof answer.json.generatedAt).toBe('string')
    expect(Object.keys(answer.json.tenants.acme)).toEqual([EXECUTE, RUN_INVOKE, 'POST /v1/runs/:runId/invoke'])
    // SPEC 15 compares execute and session-execute only: a proxy route is not listed.
    expect(Object.keys(answer.json.tenants.beta)).toEqual(['POST /v1/run'])
    expect(answer.json.tenants.acme[EXECUTE]).toMatchObject({
      comparisons: 2,
      matches: 1,
      mismatches: 1,
      candidateErrors: 0,
      primaryErrors: 0,
      dropped: 0,
      skipped: 0,
      mismatchRate: 0.5,
      last24h: { comparisons: 2, matches: 1, mismatches: 1, mismatchRate: 0.5 },
      topPointers: [
        { pointer: '#status', count: 1 },
        { pointer: '/output/~h1a2b3c4d', count: 1 }
      ],
      samples: [{ requestId: 'req-mismatch', primaryStatus: 200, candidateStatus: 500, pointers: ['#status', '/output/~h1a2b3c4d'] }]
    })
    expect(answer.json.tenants.acme[RUN_INVOKE]).toMatchObject({ comparisons: 0, mismatchRate: null })
  })

  it('answers one tenant with ?tenant=T, and 404 TENANT_UNKNOWN for one that is not configured', async () => {
    const one = await send(gw.adminUrl, '/admin/shadow?tenant=beta')
    expect(Object.keys(one.json.tenants)).toEqual(['beta'])
    const unknown = await send(gw.adminUrl, '/admin/shadow?tenant=nobody')
    expect(unknown.status).toBe(404)
    expect(unknown.json.error.code).toBe('TENANT_UNKNOWN')
  })

  it('counts each outcome in v4gw_shadow_comparisons_total{tenant,route,outcome}', async () => {
    record('beta', 'POST /v1/run', 'dropped')
    const metrics = (await send(gw.adminUrl, '/metrics')).text
    expect(metrics).toContain('v4gw_shadow_comparisons_total{tenant="beta",route="POST /v1/run",outcome="dropped"} 1')
  })

  it('resets one route with DELETE ?tenant=T&route=…, with an admin change line, and leaves the others', async () => {
    record('beta', 'POST /v1/run', 'match')
    record('acme', RUN_INVOKE, 'match')
    const reset = await send(gw.adminUrl, `/admin/shadow?tenant=acme&route=${encodeURIComponent(RUN_INVOKE)}`, { method: 'DELETE', headers: { 'x-request-id': 'shadow-reset-1' } })
    expect(reset.status).toBe(200)
    expect(reset.json).toEqual({ reset: { tenant: 'acme', route: RUN_INVOKE }, scope: 'replica' })
    const after = await send(gw.adminUrl, '/admin/shadow')
    expect(after.json.tenants.acme[RUN_INVOKE]).toMatchObject({ comparisons: 0 })
    expect(Date.parse(after.json.tenants.acme[RUN_INVOKE].since)).toBeGreaterThan(Date.parse(after.json.tenants.acme[EXECUTE].since))
    expect(after.json.tenants.beta['POST /v1/run'].comparisons).toBeGreaterThan(0)
    const lines = gw.logs.lines().filter((line) => line.msg === 'admin change' && line.requestId === 'shadow-reset-1')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ level: 40, endpoint: 'DELETE /admin/shadow', query: { tenant: 'acme', route: RUN_INVOKE } })
  })

  it('resets every route of a tenant without a route', async () => {
    record('beta', 'POST /v1/run', 'match')
    expect((await send(gw.adminUrl, '/admin/shadow?tenant=beta', { method: 'DELETE' })).json).toEqual({ reset: { tenant: 'beta', route: null }, scope: 'replica' })
    expect((await send(gw.adminUrl, '/admin/shadow?tenant=beta')).json.tenants.beta['POST /v1/run'].comparisons).toBe(0)
  })

  it('refuses a reset without a tenant (400), of an unknown tenant or route (404), and with a body that is not JSON (415)', async () => {
    const none = await send(gw.adminUrl, '/admin/shadow', { method: 'DELETE' })
    expect(none.status).toBe(400)
    expect(none.json.error.details).toEqual([{ pointer: 'query:tenant', message: 'required, once' }])
    expect((await send(gw.adminUrl, '/admin/shadow?tenant=nobody', { method: 'DELETE' })).json.error.code).toBe('TENANT_UNKNOWN')
    const proxyRoute = await send(gw.adminUrl, `/admin/shadow?tenant=beta&route=${encodeURIComponent('GET /v1/policies')}`, { method: 'DELETE' })
    expect(proxyRoute.status).toBe(404)
    expect(proxyRoute.json.error.code).toBe('ROUTE_NOT_FOUND')
    const form = await send(gw.adminUrl, '/admin/shadow?tenant=acme', { method: 'DELETE', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'a=1' })
    expect(form.status).toBe(415)
    expect(form.json.error.code).toBe('UNSUPPORTED_MEDIA_TYPE')
  })
})
