import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ERROR_STATUS, GatewayError, isGatewayError } from '../../../src/errors/registry.js'

function documentedCodes(): Map<string, number> {
  const text = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8')
  const rows = [...text.matchAll(/^\| `([A-Z_]+)` \| (\d{3}) \|/gm)]
  return new Map(rows.map((row) => [row[1] as string, Number(row[2])]))
}

describe('the error registry', () => {
  it('documents every registered code with its status in docs/errors.md', () => {
    const documented = documentedCodes()
    for (const [code, status] of Object.entries(ERROR_STATUS)) expect(documented.get(code), code).toBe(status)
  })

  it('registers every code that docs/errors.md documents', () => {
    for (const [code, status] of documentedCodes()) expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS], code).toBe(status)
  })

  // CI clones the repo with shared/ beside it; a clone elsewhere has no SPEC to compare with.
  const specUrl = new URL('../../../../shared/SPEC.md', import.meta.url)
  it.skipIf(!existsSync(specUrl))('holds every SPEC 6 code with the status the SPEC gives it', () => {
    const spec = readFileSync(specUrl, 'utf8')
    const section = spec.slice(spec.indexOf('### Errors made by the gateway'), spec.indexOf('## 7.'))
    const rows = [...section.matchAll(/^\| `([A-Z_]+)`(?: \/ `([A-Z_]+)`)? \| (\d{3}) \|/gm)]
    expect(rows.length).toBeGreaterThan(10)
    for (const row of rows) {
      for (const code of [row[1], row[2]].filter((value): value is string => value !== undefined)) {
        expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS], code).toBe(Number(row[3]))
      }
    }
  })

  it('gives a GatewayError the status of its code and is recognised by code, not class', () => {
    const error = new GatewayError('TENANT_UNKNOWN', 'no such tenant')
    expect(error.statusCode).toBe(404)
    expect(isGatewayError(error)).toBe(true)
    expect(isGatewayError(Object.assign(new Error('x'), { code: 'TENANT_UNKNOWN' }))).toBe(false)
    expect(isGatewayError(Object.assign(new Error('x'), { name: 'GatewayError', code: 'NOPE' }))).toBe(false)
  })
})
