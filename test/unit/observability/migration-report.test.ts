import { describe, expect, it } from 'vitest'
import { createMigrationReport } from '../../../src/observability/migration-report.js'

const atMs = Date.parse('2026-11-01T10:00:00Z')

describe('the migration report', () => {
  it('keeps at most maxClientsPerRoute clients per route and counts the distinct ones it could not keep', () => {
    const report = createMigrationReport({ maxClientsPerRoute: 3 })
    for (let client = 0; client < 10; client++) {
      for (let call = 0; call < 2; call++) report.record({ tenant: 't', route: 'POST /v1/x', clientFingerprint: `fp${client}`, userAgent: 'ua', atMs })
    }
    const route = report.snapshot().tenants.t?.routes['POST /v1/x']
    expect(route?.requests).toBe(20)
    expect(route?.clients).toHaveLength(3)
    expect(route?.clientsNotTracked).toBe(7)
    expect(route?.distinctClients).toBe(10)
  })

  it('cuts long user agents so one client cannot grow the report', () => {
    const report = createMigrationReport({ maxClientsPerRoute: 3 })
    report.record({ tenant: 't', route: 'r', clientFingerprint: 'fp', userAgent: 'x'.repeat(10_000), atMs })
    expect(report.snapshot().tenants.t?.routes.r?.clients[0]?.userAgent.length).toBe(256)
  })

  it('forgets tenants and routes the config no longer has', () => {
    const report = createMigrationReport({ maxClientsPerRoute: 3 })
    report.record({ tenant: 'a', route: 'r1', clientFingerprint: undefined, userAgent: undefined, atMs })
    report.record({ tenant: 'b', route: 'r2', clientFingerprint: undefined, userAgent: undefined, atMs })
    report.retain((tenant) => tenant === 'a')
    expect(Object.keys(report.snapshot().tenants)).toEqual(['a'])
  })
})
