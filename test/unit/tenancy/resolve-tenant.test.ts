import { describe, expect, it } from 'vitest'
import { configSchema } from '../../../src/config/schema.js'
import { isGatewayError, type GatewayError } from '../../../src/errors/registry.js'
import { buildGatewayRuntime } from '../../../src/tenancy/gateway-runtime.js'
import { resolveTenant, type TenancyRuntime } from '../../../src/tenancy/resolve-tenant.js'

/** Two tenants on different upstreams, built the way the gateway builds them. */
function tenancy(settings: Record<string, unknown> = {}): TenancyRuntime {
  const config = configSchema.parse({
    tenancy: settings,
    tenants: {
      acme: { upstream: { staging: 'http://127.0.0.1:4010' } },
      beta: { upstream: { staging: 'http://127.0.0.1:4020' } }
    }
  })
  return buildGatewayRuntime(config, undefined).tenancy
}

function thrownBy(action: () => unknown): GatewayError {
  try {
    action()
  } catch (error) {
    expect(isGatewayError(error)).toBe(true)
    return error as GatewayError
  }
  throw new Error('expected a GatewayError, nothing was thrown')
}

describe('resolveTenant', () => {
  it('takes the tenant from the tenancy header first', () => {
    const runtime = tenancy({ hosts: { 'api.example.com': 'acme' }, default: 'acme' })
    expect(resolveTenant(runtime, 'beta', 'api.example.com').name).toBe('beta')
  })

  it('takes the tenant from the Host map when there is no header', () => {
    const runtime = tenancy({ hosts: { 'beta.example.com': 'beta' }, default: 'acme' })
    expect(resolveTenant(runtime, undefined, 'beta.example.com').name).toBe('beta')
  })

  it('matches the Host map lower-cased and without the port', () => {
    const runtime = tenancy({ hosts: { 'beta.example.com': 'beta' }, default: 'acme' })
    expect(resolveTenant(runtime, undefined, 'Beta.Example.COM:8443').name).toBe('beta')
  })

  it('matches a Host map entry written in upper case', () => {
    const runtime = tenancy({ hosts: { 'BETA.example.com': 'beta' } })
    expect(resolveTenant(runtime, undefined, 'beta.example.com').name).toBe('beta')
  })

  it('matches an IPv6 Host against a bracketed Host map entry', () => {
    const runtime = tenancy({ hosts: { '[::1]': 'beta' }, default: 'acme' })
    expect(resolveTenant(runtime, undefined, '[::1]:8080').name).toBe('beta')
  })

  it('falls back to tenancy.default when neither header nor Host map applies', () => {
    const runtime = tenancy({ hosts: { 'beta.example.com': 'beta' }, default: 'acme' })
    expect(resolveTenant(runtime, undefined, 'other.example.com').name).toBe('acme')
  })

  it('treats an empty tenancy header as absent', () => {
    const runtime = tenancy({ default: 'beta' })
    expect(resolveTenant(runtime, '', undefined).name).toBe('beta')
  })

  it('throws 404 TENANT_UNKNOWN for a header naming an unconfigured tenant, even with a default', () => {
    const error = thrownBy(() => resolveTenant(tenancy({ default: 'acme' }), 'ghost', undefined))
    expect(error.code).toBe('TENANT_UNKNOWN')
    expect(error.statusCode).toBe(404)
  })

  it('does not echo the requested tenant name in the TENANT_UNKNOWN message', () => {
    const error = thrownBy(() => resolveTenant(tenancy(), '<script>ghost</script>', undefined))
    expect(error.message).not.toContain('ghost')
    expect(JSON.stringify(error.details)).not.toContain('ghost')
  })

  it('throws 400 TENANT_REQUIRED without header, Host map entry or default', () => {
    const error = thrownBy(() => resolveTenant(tenancy({ hosts: { 'beta.example.com': 'beta' } }), undefined, 'other.example.com'))
    expect(error.code).toBe('TENANT_REQUIRED')
    expect(error.statusCode).toBe(400)
  })

  it('names the configured tenancy header in TENANT_REQUIRED', () => {
    const error = thrownBy(() => resolveTenant(tenancy({ header: 'X-Org' }), undefined, undefined))
    expect(error.code).toBe('TENANT_REQUIRED')
    expect(error.message).toContain('x-org')
  })

  it('does not take a tenant name from an inherited object property', () => {
    const error = thrownBy(() => resolveTenant(tenancy(), 'constructor', undefined))
    expect(error.code).toBe('TENANT_UNKNOWN')
  })
})
