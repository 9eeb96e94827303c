import type { GatewayConfig } from './schema.js'

/**
 * SPEC 12: a `hdr:` id is asserted by the client, not authenticated: anyone can send the header.
 * `check-config` warns for each in `exempt` (SPEC 13), `allow` or `deny` (SPEC 14's canary lists),
 * wherever a tenant holds them (its deprecation, each route's, its migration block). Read from the
 * parsed tenant as plain data, so a list added under another key of the tenant is covered too.
 */
export function headerIdWarnings(config: GatewayConfig): string[] {
  const warnings: string[] = []
  for (const [name, tenant] of Object.entries(config.tenants)) collect(tenant, ['tenants', name], warnings)
  return warnings
}

function collect(node: unknown, path: (string | number)[], warnings: string[]): void {
  if (Array.isArray(node)) {
    node.forEach((item, index) => collect(item, [...path, index], warnings))
    return
  }
  if (node === null || typeof node !== 'object') return
  for (const [key, value] of Object.entries(node)) {
    if ((key === 'exempt' || key === 'allow' || key === 'deny') && Array.isArray(value)) {
      value.forEach((entry: unknown, index) => {
        const id = typeof entry === 'string' ? entry : typeof entry === 'object' && entry !== null ? (entry as { client?: unknown }).client : undefined
        if (typeof id === 'string' && id.startsWith('hdr:')) {
          const at = [...path, key, index, ...(typeof entry === 'string' ? [] : ['client'])].join('.')
          warnings.push(`${at}: ${id} is a header id, which the client asserts and the gateway does not authenticate: any caller that sends it is ${key === 'deny' ? 'kept out' : key === 'allow' ? 'let in' : 'exempt'}`)
        }
      })
    } else {
      collect(value, [...path, key], warnings)
    }
  }
}
