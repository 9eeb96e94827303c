import { describe, expect, it } from 'vitest'
import { tenantSchema, type TenantConfig } from '../../../src/config/schema.js'
import { listUpcomingBrownouts } from '../../../src/tenancy/deprecation-policy.js'

/** SPEC 13: a reload's answer and log list `upcomingBrownouts` (active or starting within 24 h). */
const NOW = Date.parse('2027-03-01T12:00:00Z')
const HOUR = 3_600_000
const iso = (ms: number): string => new Date(ms).toISOString()
const TENANT_WINDOW = { start: iso(NOW + HOUR), end: iso(NOW + 2 * HOUR) }

function tenant(routes: Record<string, unknown> = {}): TenantConfig {
  return tenantSchema.parse({
    upstream: { staging: 'http://127.0.0.1:4010' },
    legacy: { deprecation: { date: iso(NOW - 30 * 24 * HOUR), brownouts: { windows: [TENANT_WINDOW] } } },
    migration: { routes }
  })
}

describe('listUpcomingBrownouts (SPEC 13)', () => {
  it('lists a tenant\'s window once when its routes take it as it is', () => {
    expect(listUpcomingBrownouts({ acme: tenant() }, NOW)).toEqual([{ tenant: 'acme', route: null, ...TENANT_WINDOW }])
  })

  it('does not list the tenant\'s window again under a route whose entry changes only its link', () => {
    const acme = tenant({ 'POST /v1/headless/runs': { deprecation: { link: 'https://docs.example.com/headless' } } })
    expect(listUpcomingBrownouts({ acme }, NOW)).toEqual([{ tenant: 'acme', route: null, ...TENANT_WINDOW }])
  })

  it('says which routes a tenant\'s window spares, and lists a route\'s own windows under it', () => {
    const own = { start: iso(NOW + 3 * HOUR), end: iso(NOW + 4 * HOUR) }
    const acme = tenant({
      'POST /v1/runs/invoke': { deprecation: null },
      'POST /v1/headless/runs': { deprecation: { brownouts: { windows: [own] } } }
    })
    const listed = listUpcomingBrownouts({ acme }, NOW)
    expect(listed).toHaveLength(2)
    expect(listed[0]).toEqual({ tenant: 'acme', route: null, ...TENANT_WINDOW, except: expect.arrayContaining(['POST /v1/runs/invoke', 'POST /v1/headless/runs']) })
    expect(listed[0]?.except).toHaveLength(2)
    expect(listed[1]).toEqual({ tenant: 'acme', route: 'POST /v1/headless/runs', ...own })
  })

  it('leaves out windows that ended or start after 24 h', () => {
    const acme = tenantSchema.parse({
      upstream: { staging: 'http://127.0.0.1:4010' },
      legacy: { deprecation: { date: iso(NOW - 30 * 24 * HOUR), brownouts: { windows: [{ start: iso(NOW - 2 * HOUR), end: iso(NOW - HOUR) }, { start: iso(NOW - HOUR), end: iso(NOW + HOUR) }, { start: iso(NOW + 25 * HOUR), end: iso(NOW + 26 * HOUR) }] } } }
    })
    expect(listUpcomingBrownouts({ acme }, NOW)).toEqual([{ tenant: 'acme', route: null, start: iso(NOW - HOUR), end: iso(NOW + HOUR) }])
  })
})
