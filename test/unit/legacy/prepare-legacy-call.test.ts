import { describe, expect, it } from 'vitest'
import { legacyFieldsSchema } from '../../../src/config/schema.js'
import { parseLegacyCall } from '../../../src/legacy/parse-legacy-body.js'
import { credentialHeaders } from '../../../src/legacy/prepare-legacy-call.js'

describe('credentialHeaders', () => {
  const sources = ['authorization', 'x-session-token', 'x-api-key']

  it('gives each configured header every value it was sent with, in order, like headersDistinct', () => {
    const raw = ['Host', 'gw.test', 'Authorization', 'Bearer a', 'X-Api-Key', 'k1', 'user-agent', 'ua', 'authorization', 'Bearer b', 'X-API-KEY', 'k2']
    expect(credentialHeaders(raw, sources)).toEqual({ authorization: ['Bearer a', 'Bearer b'], 'x-api-key': ['k1', 'k2'] })
  })

  it('reads each header once when the config lists a source twice', () => {
    expect(credentialHeaders(['Authorization', 'Bearer a'], ['authorization', 'authorization'])).toEqual({ authorization: ['Bearer a'] })
  })

  it('ignores headers that are not configured sources, even credential-looking ones', () => {
    expect(credentialHeaders(['X-Service-Api-Key', 'key_1', 'Cookie', 'a=b'], sources)).toEqual({})
  })
})

describe('parseLegacyCall unknown members', () => {
  it('keeps a member named __proto__ as an own member, not as the prototype', () => {
    const body = JSON.parse('{"input":1,"__proto__":{"polluted":true},"extra":2}') as Record<string, unknown>
    const call = parseLegacyCall(body, 'execute', legacyFieldsSchema.parse({}), 'keep')
    expect(Object.keys(call.unknown)).toEqual(['__proto__', 'extra'])
    expect(Object.getPrototypeOf(call.unknown)).toBe(Object.prototype)
    expect(JSON.stringify({ ...call.unknown, input: call.input })).toBe('{"__proto__":{"polluted":true},"extra":2,"input":1}')
  })

  it('keeps nothing with unknownFields drop, and consumes a body: state key', () => {
    const body = { input: 1, extra: 2, clientState: 'k' }
    expect(parseLegacyCall(body, 'session-execute', legacyFieldsSchema.parse({}), 'drop').unknown).toEqual({})
    expect(parseLegacyCall(body, 'session-execute', legacyFieldsSchema.parse({}), 'keep', '/clientState').unknown).toEqual({ extra: 2 })
  })
})
