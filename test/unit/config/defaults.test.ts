import { beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '../../../src/config/load-config.js'
import type { GatewayConfig, TenantConfig } from '../../../src/config/schema.js'
import { useTempDir } from '../../helpers/temp-dir.js'

const dir = useTempDir('v4gw-defaults-')
let config: GatewayConfig
let tenant: TenantConfig

beforeAll(async () => {
  // Only `tenants` with one upstream is required (SPEC 8).
  config = await loadConfig(await dir.write('minimal.yaml', 'tenants:\n  acme:\n    upstream:\n      staging: http://127.0.0.1:4010\n'), {})
  tenant = config.tenants.acme as TenantConfig
})

describe('SPEC 8 defaults of a minimal config', () => {
  it('listens on 0.0.0.0:8080', () => {
    expect(config.listen).toEqual({ host: '0.0.0.0', port: 8080 })
  })

  it('puts the admin listener on 127.0.0.1:9901 without a token or more Host names', () => {
    expect(config.admin).toEqual({ host: '127.0.0.1', port: 9901, token: null, allowedHosts: [] })
  })

  it('logs at info, access lines on', () => {
    expect(config.log).toEqual({ level: 'info', access: true })
  })

  it('fills every limit', () => {
    expect(config.limits).toEqual({ bodyBytes: 1_048_576, upstreamTimeoutMs: 30_000, connectTimeoutMs: 5_000, maxInFlight: 10_000, maxEventLoopDelayMs: 1_000, shadowInFlight: 1_000 })
  })

  it('gives shutdown a 10 s grace period, and idle connections 1 s before they are closed', () => {
    expect(config.shutdown).toEqual({ graceMs: 10_000, idleCloseMs: 1_000 })
  })

  it('fills the credential prefixes, no query parameter and all four sources in order', () => {
    expect(config.credentials).toEqual({
      serviceKeyPrefix: 'key_',
      serviceAccountPrefix: 'sa_',
      queryParam: null,
      sources: ['authorization', 'x-session-token', 'x-api-key', 'x-service-api-key']
    })
  })

  it('fills the session map defaults', () => {
    expect(config.sessions).toEqual({
      maxEntries: 10_000,
      ttlMs: 900_000,
      staleStatuses: [404, 410],
      sessionIdPaths: ['/sessionId', '/id', '/session/id', '/meta/sessionId'],
      store: 'memory',
      redis: { url: null, keyPrefix: 'v4gw:' }
    })
  })

  it('reads the tenant from x-tenant-id with no hosts and no default', () => {
    expect(config.tenancy).toEqual({ header: 'x-tenant-id', hosts: {}, default: null })
  })

  it('blocks no internal admin URLs or paths', () => {
    expect(config.internalAdmin).toEqual({ urls: [], pathPrefixes: [] })
  })

  it('targets staging with no production upstream', () => {
    expect(tenant.upstream).toEqual({ staging: 'http://127.0.0.1:4010', production: null, target: 'staging' })
  })

  it('gives a tenant without routes the legacy-v1 route table', () => {
    expect(tenant.legacy.routes).toEqual([
      { method: 'POST', path: '/v1/headless/runs', action: 'execute' },
      { method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/stateId' },
      { method: 'POST', path: '/v1/runs/:runId/invoke', action: 'session-execute', stateKey: 'param:runId' }
    ])
  })

  it('gives a tenant the legacy-v1 field pointers', () => {
    expect(tenant.legacy.fields).toEqual({ input: '/input', policy: '/policy', route: '/route', risk: '/risk', state: '/state', stateId: '/stateId' })
  })

  it('keeps unknown fields, copies no response fields and sends no deprecation headers', () => {
    expect(tenant.legacy.unknownFields).toBe('keep')
    expect(tenant.legacy.responseFields).toEqual([])
    expect(tenant.legacy.deprecation).toBeNull()
  })

  it('rejects unknown traffic instead of proxying it', () => {
    expect(tenant.fallback).toBe('reject')
  })
})

describe('partial sections', () => {
  it('fills the legacy-v1 fields a tenant did not remap', async () => {
    const path = await dir.write('fields.yaml', 'tenants:\n  acme:\n    upstream: { staging: "http://127.0.0.1:4010" }\n    legacy:\n      fields: { input: /payload }\n')
    const loaded = await loadConfig(path, {})
    expect(loaded.tenants.acme?.legacy.fields).toEqual({ input: '/payload', policy: '/policy', route: '/route', risk: '/risk', state: '/state', stateId: '/stateId' })
  })

  it('fills the limits a config did not set', async () => {
    const path = await dir.write('limits.yaml', 'limits: { bodyBytes: 2048 }\ntenants:\n  acme:\n    upstream: { staging: "http://127.0.0.1:4010" }\n')
    const loaded = await loadConfig(path, {})
    expect(loaded.limits).toEqual({ bodyBytes: 2048, upstreamTimeoutMs: 30_000, connectTimeoutMs: 5_000, maxInFlight: 10_000, maxEventLoopDelayMs: 1_000, shadowInFlight: 1_000 })
  })

  it('gives each tenant its own copy of the legacy-v1 route table', async () => {
    const path = await dir.write('two-tenants.yaml', 'tenants:\n  a:\n    upstream: { staging: "http://127.0.0.1:4010" }\n  b:\n    upstream: { staging: "http://127.0.0.1:4011" }\n')
    const loaded = await loadConfig(path, {})
    expect(loaded.tenants.a?.legacy.routes).toEqual(loaded.tenants.b?.legacy.routes)
    expect(loaded.tenants.a?.legacy.routes).not.toBe(loaded.tenants.b?.legacy.routes)
  })
})
