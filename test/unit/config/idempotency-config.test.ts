import { describe, expect, it } from 'vitest'
import { configSchema } from '../../../src/config/schema.js'

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
})
