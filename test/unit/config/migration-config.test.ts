import { describe, expect, it } from 'vitest'
import { configSchema } from '../../../src/config/schema.js'
import { buildRouteMigrations, tenantUsesStages } from '../../../src/tenancy/migration-policy.js'

/** SPEC 14's keys in the config: validated at load, each problem with its path. */

const staging = 'http://127.0.0.1:4010'
const legacy = 'http://127.0.0.1:4011'
const ALICE = 'fp:1159bf80f41ccf3d'

function parse(tenant: Record<string, unknown>, top: Record<string, unknown> = {}) {
  return configSchema.safeParse({ ...top, tenants: { acme: { upstream: { staging }, ...tenant } } })
}

function problems(tenant: Record<string, unknown>, top: Record<string, unknown> = {}): string[] {
  const parsed = parse(tenant, top)
  return parsed.success ? [] : parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`)
}

describe('SPEC 14 migration keys at load', () => {
  it('accepts a config without them: every route in translate, and the tenant does not use stages', () => {
    const parsed = parse({})
    expect(parsed.success).toBe(true)
    const tenant = parsed.data!.tenants.acme!
    expect(tenantUsesStages(tenant)).toBe(false)
    expect([...buildRouteMigrations(tenant).values()].map((route) => route.stage)).toEqual(['translate', 'translate', 'translate'])
  })

  it('merges a route entry over the tenant key by key: stage replaced, canary percent replaced and lists kept, null back to translate', () => {
    const parsed = parse({
      upstream: { staging, legacy },
      migration: {
        stage: 'shadow',
        canary: { percent: 10, allow: [ALICE], deny: ['anonymous'] },
        routes: { 'POST /v1/runs/invoke': { stage: 'canary', canary: { percent: 25 } }, 'POST /v1/runs/:runId/invoke': { stage: null } }
      }
    })
    expect(parsed.success).toBe(true)
    const routes = buildRouteMigrations(parsed.data!.tenants.acme!)
    expect(routes.get('POST /v1/headless/runs')).toMatchObject({ stage: 'shadow', stageFrom: 'tenant', canary: { percent: 10 } })
    const invoke = routes.get('POST /v1/runs/invoke')!
    expect(invoke).toMatchObject({ stage: 'canary', stageFrom: 'route', canary: { percent: 25, bucketBound: 2_500 } })
    expect([...invoke.canary.allow]).toEqual([ALICE])
    expect([...invoke.canary.deny]).toEqual(['anonymous'])
    expect(routes.get('POST /v1/runs/:runId/invoke')).toMatchObject({ stage: 'translate', stageFrom: 'default' })
  })

  it('takes a canary key a route sets to null away from the tenant\'s: no allow list, 0 %, the rest kept', () => {
    const parsed = parse({
      upstream: { staging, legacy },
      migration: {
        stage: 'canary',
        canary: { percent: 10, allow: [ALICE], deny: ['anonymous'] },
        routes: { 'POST /v1/runs/invoke': { canary: { allow: null } }, 'POST /v1/headless/runs': { canary: { percent: null, deny: null } } }
      }
    })
    expect(parsed.success).toBe(true)
    const routes = buildRouteMigrations(parsed.data!.tenants.acme!)
    const invoke = routes.get('POST /v1/runs/invoke')!
    expect(invoke.canary.percent).toBe(10)
    expect([...invoke.canary.allow]).toEqual([])
    expect([...invoke.canary.deny]).toEqual(['anonymous'])
    const headless = routes.get('POST /v1/headless/runs')!
    expect(headless.canary.percent).toBe(0)
    expect([...headless.canary.allow]).toEqual([ALICE])
    expect([...headless.canary.deny]).toEqual([])
  })

  it.each(['legacy', 'shadow', 'canary'])('refuses stage %s without upstream.legacy, at the key that sets it', (stage) => {
    expect(problems({ migration: { stage } })).toEqual([expect.stringMatching(/^tenants\.acme\.migration\.stage: stage \w+ needs upstream\.legacy/)])
    expect(problems({ migration: { routes: { 'POST /v1/runs/invoke': { stage } } } })).toEqual([expect.stringMatching(/^tenants\.acme\.migration\.routes\.POST \/v1\/runs\/invoke\.stage: stage \w+ needs upstream\.legacy/)])
  })

  it('takes translate and native-only without upstream.legacy', () => {
    expect(problems({ migration: { stage: 'native-only', routes: { 'POST /v1/runs/invoke': { stage: 'translate' } } } })).toEqual([])
  })

  it('refuses an unknown stage', () => {
    expect(problems({ migration: { stage: 'half' } })[0]).toMatch(/^tenants\.acme\.migration\.stage: /)
  })

  it('refuses a proxy route in stage shadow', () => {
    const routes = [{ method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }]
    expect(problems({ upstream: { staging, legacy }, legacy: { routes }, migration: { stage: 'shadow' } })).toEqual([expect.stringMatching(/^tenants\.acme\.migration\.stage: GET \/v1\/policies is a proxy route/)])
  })

  it('refuses anonymous in allow and an id in both allow and deny, on the tenant and on a route', () => {
    expect(problems({ upstream: { staging, legacy }, migration: { stage: 'canary', canary: { allow: ['anonymous'] } } })).toEqual([expect.stringMatching(/^tenants\.acme\.migration\.canary\.allow\.0: anonymous may be listed only in deny/)])
    expect(problems({ upstream: { staging, legacy }, migration: { canary: { allow: [ALICE], deny: [ALICE] } } })).toEqual([expect.stringMatching(/^tenants\.acme\.migration\.canary\.allow\.0: .* both allow and deny/)])
    expect(problems({ upstream: { staging, legacy }, migration: { canary: { deny: [ALICE] }, routes: { 'POST /v1/runs/invoke': { canary: { allow: [ALICE] } } } } })).toEqual([
      expect.stringMatching(/^tenants\.acme\.migration\.routes\.POST \/v1\/runs\/invoke\.canary\.allow\.0: .* both allow and deny/)
    ])
  })

  it('refuses a canary percentage over 100 or with three decimals, and a malformed client id', () => {
    expect(problems({ migration: { canary: { percent: 101 } } })[0]).toMatch(/^tenants\.acme\.migration\.canary\.percent: /)
    expect(problems({ migration: { canary: { percent: 12.345 } } })[0]).toMatch(/^tenants\.acme\.migration\.canary\.percent: at most two decimals/)
    expect(problems({ migration: { canary: { allow: ['alice'] } } })[0]).toMatch(/^tenants\.acme\.migration\.canary\.allow\.0: expected a client id/)
  })

  it('refuses an allow or deny id of a kind clients.key cannot produce', () => {
    expect(problems({ upstream: { staging, legacy }, migration: { canary: { deny: ['hdr:batch-job'] } } })).toEqual([expect.stringMatching(/^tenants\.acme\.migration\.canary\.deny\.0: an hdr: id comes only from a header:NAME source/)])
  })

  it('refuses an upstream.legacy on an internalAdmin origin and on the traffic listener itself', () => {
    expect(problems({ upstream: { staging, legacy: 'http://admin.internal:9000' } }, { internalAdmin: { urls: ['http://admin.internal:9000/'] } })).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.legacy: this origin is listed in internalAdmin\.urls/)])
    expect(problems({ upstream: { staging, legacy: 'http://localhost:8080' } }, { listen: { host: '0.0.0.0', port: 8080 } })).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.legacy: this is the traffic listener's own address/)])
    expect(problems({ upstream: { staging, legacy: 'http://127.0.0.1:8081' } }, { listen: { host: '127.0.0.1', port: 8080 } })).toEqual([])
  })

  it('refuses an upstream.legacy with a path, as every upstream', () => {
    expect(problems({ upstream: { staging, legacy: 'http://legacy.internal:8080/v1' } })[0]).toMatch(/^tenants\.acme\.upstream\.legacy: /)
  })
})
