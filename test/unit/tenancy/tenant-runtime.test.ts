import { describe, expect, it } from 'vitest'
import { tenantSchema, type TenantConfig } from '../../../src/config/schema.js'
import { buildDeprecationHeaders, buildTenantRuntime, selectUpstreamUrl } from '../../../src/tenancy/tenant-runtime.js'

function tenant(upstream: Record<string, unknown>, legacy: Record<string, unknown> = {}): TenantConfig {
  return tenantSchema.parse({ upstream, legacy })
}

describe('selectUpstreamUrl (staging-first)', () => {
  it('selects staging when no target is set, even when production is set', () => {
    expect(selectUpstreamUrl(tenant({ staging: 'http://staging.example:4010', production: 'https://v4.example.com' }))).toBe('http://staging.example:4010')
  })

  it('selects staging when target is staging', () => {
    expect(selectUpstreamUrl(tenant({ staging: 'http://staging.example:4010', production: 'https://v4.example.com', target: 'staging' }))).toBe('http://staging.example:4010')
  })

  it('selects production only when target is production', () => {
    expect(selectUpstreamUrl(tenant({ staging: 'http://staging.example:4010', production: 'https://v4.example.com', target: 'production' }))).toBe('https://v4.example.com')
  })
})

describe('buildTenantRuntime', () => {
  it('uses the origin of the target upstream, without its trailing slash', () => {
    const runtime = buildTenantRuntime('acme', tenant({ staging: 'http://staging.example:4010/' }), undefined)
    expect(runtime.upstreamOrigin).toBe('http://staging.example:4010')
    expect(runtime.upstreamTarget).toBe('staging')
  })

  it('uses the production origin when target is production', () => {
    const runtime = buildTenantRuntime('acme', tenant({ staging: 'http://staging.example:4010', production: 'https://v4.example.com', target: 'production' }), undefined)
    expect(runtime.upstreamOrigin).toBe('https://v4.example.com')
    expect(runtime.upstreamTarget).toBe('production')
  })

  it('uses the embedded simulator origin for an embedded upstream', () => {
    const runtime = buildTenantRuntime('acme', tenant({ staging: 'embedded' }), 'http://127.0.0.1:45678')
    expect(runtime.upstreamOrigin).toBe('http://127.0.0.1:45678')
  })

  it('refuses an embedded upstream when no simulator is running', () => {
    expect(() => buildTenantRuntime('acme', tenant({ staging: 'embedded' }), undefined)).toThrow(/embedded/)
  })

  it('compiles the legacy-v1 routes of a tenant without a route table', () => {
    const runtime = buildTenantRuntime('acme', tenant({ staging: 'http://staging.example:4010' }), undefined)
    expect(runtime.routes).toHaveLength(3)
  })

  it('is frozen', () => {
    const runtime = buildTenantRuntime('acme', tenant({ staging: 'http://staging.example:4010' }), undefined)
    expect(Object.isFrozen(runtime)).toBe(true)
  })
})

describe('buildDeprecationHeaders', () => {
  it('returns null without a deprecation', () => {
    expect(buildDeprecationHeaders(null)).toBeNull()
  })

  it('writes Deprecation as @unix-seconds, Sunset as an HTTP date and Link with rel="deprecation"', () => {
    expect(buildDeprecationHeaders({ date: '2026-07-01T00:00:00Z', sunset: '2027-07-01T00:00:00Z', link: 'https://example.com/docs/v4' })).toEqual({
      deprecation: '@1782864000',
      sunset: 'Thu, 01 Jul 2027 00:00:00 GMT',
      link: '<https://example.com/docs/v4>; rel="deprecation"'
    })
  })

  it('keeps a link\'s query and fragment, percent-encoding what a Link header cannot carry', () => {
    expect(buildDeprecationHeaders({ date: '2026-07-01T00:00:00Z', link: 'https://example.com/docs/v4 guide?from=v1#sessions' })?.link).toBe(
      '<https://example.com/docs/v4%20guide?from=v1#sessions>; rel="deprecation"'
    )
  })

  it('writes only Deprecation when sunset and link are not set', () => {
    expect(buildDeprecationHeaders({ date: '2026-07-01T02:00:00+02:00' })).toEqual({ deprecation: '@1782864000' })
  })
})
