import { describe, expect, it } from 'vitest'
import { configSchema } from '../../../src/config/schema.js'
import { effectiveShadow } from '../../../src/config/shadow-config.js'
import { routeIdempotency } from '../../../src/tenancy/tenant-runtime.js'

const upstream = { staging: 'http://127.0.0.1:4010' }

function parseTenant(tenant: Record<string, unknown>) {
  return configSchema.safeParse({ tenants: { acme: { upstream, ...tenant } } })
}

describe('SPEC 16 legacy.idempotency in the config', () => {
  it('is off (null) unless set', () => {
    const parsed = parseTenant({})
    expect(parsed.success && parsed.data.tenants.acme?.legacy.idempotency).toBe(null)
  })

  it('fills SPEC 16 defaults for an empty object, and lower-cases header names', () => {
    const parsed = parseTenant({ legacy: { idempotency: { forwardHeader: 'X-Dedup-Key' } } })
    expect(parsed.success && parsed.data.tenants.acme?.legacy.idempotency).toEqual({
      keyHeader: 'idempotency-key',
      ttlMs: 86_400_000,
      waitMs: 10_000,
      maxBodyBytes: 1_048_576,
      maxEntries: 10_000,
      maxBytes: 67_108_864,
      forwardHeader: 'x-dedup-key'
    })
  })

  it('takes numbers given as text (a ${…} placeholder gives text)', () => {
    const parsed = parseTenant({ legacy: { idempotency: { ttlMs: '60000', waitMs: '0' } } })
    expect(parsed.success && parsed.data.tenants.acme?.legacy.idempotency).toMatchObject({ ttlMs: 60_000, waitMs: 0 })
  })

  it.each(['authorization', 'X-Request-Id', 'traceparent', 'content-type', 'x-forwarded-for', 'Via', 'keep-alive', 'upgrade', 'expect', 'te'])('refuses forwardHeader %s, a header the gateway sets on a V4 call itself', (name) => {
    expect(parseTenant({ legacy: { idempotency: { forwardHeader: name } } }).success).toBe(false)
  })

  it('refuses idempotency on a proxy route, naming its path', () => {
    const parsed = parseTenant({
      legacy: { routes: [{ method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }] },
      migration: { routes: { 'GET /v1/policies': { idempotency: {} } } }
    })
    expect(parsed.success).toBe(false)
    expect(parsed.error?.issues.map((issue) => issue.path.join('.'))).toEqual(['tenants.acme.migration.routes.GET /v1/policies.idempotency'])
  })

  it('accepts null on a proxy route and a partial entry on a translated route', () => {
    const parsed = parseTenant({
      legacy: { routes: [{ method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }, { method: 'POST', path: '/v1/headless/runs', action: 'execute' }] },
      migration: { routes: { 'GET /v1/policies': { idempotency: null }, 'POST /v1/headless/runs': { idempotency: { waitMs: 5 } } } }
    })
    expect(parsed.success && parsed.data.tenants.acme?.migration.routes['POST /v1/headless/runs']?.idempotency).toEqual({ waitMs: 5 })
  })

  it('takes a key a route sets to null away from the tenant\'s (SPEC 14): SPEC 16\'s default for the route, the other keys the tenant\'s', () => {
    const parsed = parseTenant({ legacy: { idempotency: { waitMs: 50, ttlMs: 60_000 } }, migration: { routes: { 'POST /v1/headless/runs': { idempotency: { waitMs: null } } } } })
    expect(parsed.success).toBe(true)
    const routes = routeIdempotency(parsed.data!.tenants.acme!)
    expect(routes.get('POST /v1/headless/runs')).toMatchObject({ waitMs: 10_000, ttlMs: 60_000 })
    expect(routes.get('POST /v1/runs/invoke')).toMatchObject({ waitMs: 50, ttlMs: 60_000 })
  })
})

describe('SPEC 15 shadow settings merged per route', () => {
  it('takes a key a route sets to null away from the tenant\'s block: the default for the route, the other keys the tenant\'s', () => {
    expect(effectiveShadow({ percent: 10, timeoutMs: 800 }, { percent: null })).toMatchObject({ percent: 100, timeoutMs: 800 })
    expect(effectiveShadow({ percent: 10, timeoutMs: 800 }, { timeoutMs: 2_000 })).toMatchObject({ percent: 10, timeoutMs: 2_000 })
    expect(configSchema.safeParse({ tenants: { acme: { upstream, migration: { shadow: { percent: 10 }, routes: { 'POST /v1/headless/runs': { shadow: { percent: null, ignore: null } } } } } } }).success).toBe(true)
  })
})
