import { describe, expect, it } from 'vitest'
import { configHash } from '../../../src/config/config-hash.js'
import { configSchema } from '../../../src/config/schema.js'

// SPEC 17: the config hash is published (`v4gw_config_info{hash}`, `/readyz`) to anyone who can
// scrape; a secret is hashed as set or not, never by its value (config-hash.ts).

function hashOf(overrides: { adminToken?: string | null; redisUrl?: string | null; tracingHeaders?: Record<string, string>; serviceName?: string }): string {
  return configHash(
    configSchema.parse({
      admin: { token: overrides.adminToken ?? null },
      store: overrides.redisUrl ? { kind: 'redis', redis: { url: overrides.redisUrl } } : { kind: 'memory' },
      tracing: { enabled: true, endpoint: 'http://127.0.0.1:4318/v1/traces', headers: overrides.tracingHeaders ?? {}, serviceName: overrides.serviceName ?? 'v4gw' },
      tenancy: { default: 'acme' },
      tenants: { acme: { upstream: { staging: 'http://127.0.0.1:4010' } } }
    })
  )
}

describe('configHash', () => {
  it('is the same whatever a secret’s value: the admin token, the Redis password, a collector header', () => {
    expect(hashOf({ adminToken: 'admin-token-one-0123456789abcdef' })).toBe(hashOf({ adminToken: 'admin-token-two-0123456789abcdef' }))
    expect(hashOf({ redisUrl: 'redis://user:first@127.0.0.1:6379' })).toBe(hashOf({ redisUrl: 'redis://user:second@127.0.0.1:6379' }))
    expect(hashOf({ tracingHeaders: { authorization: 'Bearer otlp-one' } })).toBe(hashOf({ tracingHeaders: { authorization: 'Bearer otlp-two' } }))
  })

  it('changes when a secret is set or removed, or a header named, and with any other value', () => {
    expect(hashOf({ adminToken: 'admin-token-one-0123456789abcdef' })).not.toBe(hashOf({}))
    expect(hashOf({ tracingHeaders: { authorization: 'Bearer otlp-one' } })).not.toBe(hashOf({}))
    expect(hashOf({ tracingHeaders: { authorization: 'x' } })).not.toBe(hashOf({ tracingHeaders: { 'x-api-key': 'x' } }))
    expect(hashOf({ serviceName: 'gateway-a' })).not.toBe(hashOf({ serviceName: 'gateway-b' }))
  })
})
