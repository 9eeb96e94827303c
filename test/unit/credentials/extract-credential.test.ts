import { describe, it, expect } from 'vitest'
import { extractCredential, MAX_CREDENTIAL_BYTES } from '../../../src/credentials/index.js'
import { credentialsConfig, thrownBy } from './fixtures.js'

const defaults = credentialsConfig()
const withQuery = credentialsConfig({ queryParam: 'token' })

describe('extractCredential: sources', () => {
  it('returns null when nothing is presented', () => {
    expect(extractCredential({}, null, defaults)).toBeNull()
  })

  it('returns null when a header is present with no values', () => {
    expect(extractCredential({ 'x-api-key': [] }, new URLSearchParams(''), defaults)).toBeNull()
  })

  it('reads a session token from authorization: Bearer', () => {
    expect(extractCredential({ authorization: ['Bearer tok123'] }, null, defaults))
      .toEqual({ value: 'tok123', kind: 'session-token', origins: ['authorization'] })
  })

  it('reads the whole value of x-session-token', () => {
    expect(extractCredential({ 'x-session-token': ['tok123'] }, null, defaults))
      .toEqual({ value: 'tok123', kind: 'session-token', origins: ['x-session-token'] })
  })

  it('reads the whole value of x-api-key', () => {
    expect(extractCredential({ 'x-api-key': ['key_abc'] }, null, defaults))
      .toEqual({ value: 'key_abc', kind: 'service-key', origins: ['x-api-key'] })
  })

  it('reads the whole value of x-service-api-key', () => {
    expect(extractCredential({ 'x-service-api-key': ['key_abc'] }, null, defaults))
      .toEqual({ value: 'key_abc', kind: 'service-key', origins: ['x-service-api-key'] })
  })

  it('classifies an sa_ value without throwing, leaving the type error to normalisation', () => {
    expect(extractCredential({ 'x-api-key': ['sa_abc'] }, null, defaults)?.kind).toBe('service-account-id')
  })

  it('ignores a header that is not in config.sources', () => {
    const config = credentialsConfig({ sources: ['authorization'] })
    expect(extractCredential({ 'x-api-key': ['key_abc'] }, null, config)).toBeNull()
  })

  it('ignores a different value in a header that is not in config.sources instead of answering CREDENTIALS_CONFLICT', () => {
    const config = credentialsConfig({ sources: ['x-api-key'] })
    expect(extractCredential({ authorization: ['Bearer tok'], 'x-api-key': ['key_abc'] }, null, config)?.value).toBe('key_abc')
  })

  it('lists origins in config.sources order', () => {
    const config = credentialsConfig({ sources: ['x-api-key', 'authorization'] })
    const credential = extractCredential({ authorization: ['Bearer key_abc'], 'x-api-key': ['key_abc'] }, null, config)
    expect(credential?.origins).toEqual(['x-api-key', 'authorization'])
  })
})

describe('extractCredential: query parameter', () => {
  it('reads the query parameter when config.queryParam is set', () => {
    expect(extractCredential({}, new URLSearchParams('a=1&token=tok123'), withQuery))
      .toEqual({ value: 'tok123', kind: 'session-token', origins: ['query'] })
  })

  it('ignores the query parameter when config.queryParam is null', () => {
    expect(extractCredential({}, new URLSearchParams('token=tok123'), defaults)).toBeNull()
  })

  it('returns null when config.queryParam is set but the query is null', () => {
    expect(extractCredential({}, null, withQuery)).toBeNull()
  })

  it('reads the query parameter after every header source', () => {
    const credential = extractCredential({ 'x-api-key': ['key_abc'] }, new URLSearchParams('token=key_abc'), withQuery)
    expect(credential?.origins).toEqual(['x-api-key', 'query'])
  })

  it('throws 400 CREDENTIALS_CONFLICT when a header and the query parameter carry different values', () => {
    const error = thrownBy(() => extractCredential({ 'x-api-key': ['key_abc'] }, new URLSearchParams('token=tok'), withQuery))
    expect(error.code).toBe('CREDENTIALS_CONFLICT')
    expect(error.statusCode).toBe(400)
    expect(error.details).toEqual([{ pointer: 'query:token', message: 'differs from the credential in header:x-api-key' }])
  })

  it('throws 400 CREDENTIALS_CONFLICT when the query parameter is repeated with different values', () => {
    const error = thrownBy(() => extractCredential({}, new URLSearchParams('token=a&token=b'), withQuery))
    expect(error.code).toBe('CREDENTIALS_CONFLICT')
    expect(error.details).toEqual([{ pointer: 'query:token', message: 'presented twice with different values' }])
  })

  it('throws 401 AUTH_INVALID when the query parameter decodes to a value with a space', () => {
    const error = thrownBy(() => extractCredential({}, new URLSearchParams('token=a+b'), withQuery))
    expect(error.code).toBe('AUTH_INVALID')
    expect(error.details).toEqual([{ pointer: 'query:token', message: 'contains whitespace, control or non-ASCII characters' }])
  })

  it('throws 401 AUTH_INVALID for a value outside visible ASCII, and says so', () => {
    const error = thrownBy(() => extractCredential({}, new URLSearchParams('token=caf%C3%A9'), withQuery))
    expect(error.code).toBe('AUTH_INVALID')
    expect(error.details).toEqual([{ pointer: 'query:token', message: 'contains whitespace, control or non-ASCII characters' }])
  })

  it('throws 401 AUTH_INVALID when the query parameter is empty', () => {
    expect(thrownBy(() => extractCredential({}, new URLSearchParams('token='), withQuery)).code).toBe('AUTH_INVALID')
  })
})

describe('extractCredential: authorization header forms', () => {
  it.each([
    ['Bearer tok123'],
    ['bearer tok123'],
    ['BEARER tok123'],
    ['Token tok123'],
    ['token tok123'],
    ['TOKEN tok123'],
    ['Bearer    tok123'],
    ['Bearer\ttok123'],
    ['Token \t tok123']
  ])('strips the scheme from %j', (raw) => {
    expect(extractCredential({ authorization: [raw] }, null, defaults)?.value).toBe('tok123')
  })

  it('takes a bare value with no whitespace as the credential itself', () => {
    expect(extractCredential({ authorization: ['tok123'] }, null, defaults)?.value).toBe('tok123')
  })

  it('takes a bare key_ value as a service-key', () => {
    expect(extractCredential({ authorization: ['key_abc'] }, null, defaults)?.kind).toBe('service-key')
  })

  it.each([['Basic abc'], ['Digest abc'], ['Bearer'], ['token'], ['Bearer a b'], ['Bearer '], ['Bearer tok\t']])(
    'throws 401 AUTH_INVALID for authorization %j',
    (raw) => {
      const error = thrownBy(() => extractCredential({ authorization: [raw] }, null, defaults))
      expect(error.code).toBe('AUTH_INVALID')
      expect(error.statusCode).toBe(401)
    }
  )

  it('names the authorization header in the details of AUTH_INVALID for an unsupported scheme', () => {
    const error = thrownBy(() => extractCredential({ authorization: ['Basic abc'] }, null, defaults))
    expect(error.details).toEqual([{ pointer: 'header:authorization', message: 'expected Bearer <token>, Token <token> or a bare token' }])
  })
})

describe('extractCredential: malformed values', () => {
  it('throws 401 AUTH_INVALID when x-api-key is empty', () => {
    const error = thrownBy(() => extractCredential({ 'x-api-key': [''] }, null, defaults))
    expect(error.code).toBe('AUTH_INVALID')
    expect(error.details).toEqual([{ pointer: 'header:x-api-key', message: 'is empty' }])
  })

  it('throws 401 AUTH_INVALID when x-session-token contains a space', () => {
    expect(thrownBy(() => extractCredential({ 'x-session-token': ['a b'] }, null, defaults)).code).toBe('AUTH_INVALID')
  })

  it('throws 401 AUTH_INVALID when x-session-token contains a tab', () => {
    expect(thrownBy(() => extractCredential({ 'x-session-token': ['a\tb'] }, null, defaults)).code).toBe('AUTH_INVALID')
  })

  it.each([['\u0000'], ['\u0001'], ['\u001f'], ['\u007f'], ['\r'], ['\n']])(
    'throws 401 AUTH_INVALID when x-api-key contains the control character %j',
    (control) => {
      expect(thrownBy(() => extractCredential({ 'x-api-key': [`key_a${control}b`] }, null, defaults)).code).toBe('AUTH_INVALID')
    }
  )

  it('throws 401 AUTH_INVALID when the value has a character outside visible ASCII', () => {
    expect(thrownBy(() => extractCredential({ 'x-session-token': ['tokén'] }, null, defaults)).code).toBe('AUTH_INVALID')
  })

  it('accepts a value of exactly 4096 bytes', () => {
    const value = 't'.repeat(MAX_CREDENTIAL_BYTES)
    expect(extractCredential({ authorization: [`Bearer ${value}`] }, null, defaults)?.value).toBe(value)
  })

  it('throws 401 AUTH_INVALID when the value is 4097 bytes', () => {
    const error = thrownBy(() => extractCredential({ authorization: [`Bearer ${'t'.repeat(MAX_CREDENTIAL_BYTES + 1)}`] }, null, defaults))
    expect(error.code).toBe('AUTH_INVALID')
    expect(error.details).toEqual([{ pointer: 'header:authorization', message: 'is longer than 4096 bytes' }])
  })

  it('throws 401 AUTH_INVALID when the value is under 4097 characters but over 4096 UTF-8 bytes', () => {
    const value = 'é'.repeat(2049)
    expect(thrownBy(() => extractCredential({ 'x-session-token': [value] }, null, defaults)).code).toBe('AUTH_INVALID')
  })
})

describe('extractCredential: repeats and conflicts', () => {
  it('accepts the same value in two sources and lists both origins', () => {
    expect(extractCredential({ authorization: ['Bearer key_abc'], 'x-api-key': ['key_abc'] }, null, defaults))
      .toEqual({ value: 'key_abc', kind: 'service-key', origins: ['authorization', 'x-api-key'] })
  })

  it('accepts a repeated header with the same value and names the origin once', () => {
    expect(extractCredential({ 'x-api-key': ['key_abc', 'key_abc'] }, null, defaults)?.origins).toEqual(['x-api-key'])
  })

  it('accepts the same token sent as Bearer, Token and bare in repeated authorization headers', () => {
    expect(extractCredential({ authorization: ['Bearer tok', 'token tok', 'tok'] }, null, defaults)?.value).toBe('tok')
  })

  it('throws 400 CREDENTIALS_CONFLICT when authorization and x-api-key carry different values', () => {
    const error = thrownBy(() => extractCredential({ authorization: ['Bearer tok'], 'x-api-key': ['key_abc'] }, null, defaults))
    expect(error.code).toBe('CREDENTIALS_CONFLICT')
    expect(error.statusCode).toBe(400)
    expect(error.details).toEqual([{ pointer: 'header:x-api-key', message: 'differs from the credential in header:authorization' }])
  })

  it('throws 400 CREDENTIALS_CONFLICT when x-session-token and x-service-api-key carry different values', () => {
    const error = thrownBy(() => extractCredential({ 'x-session-token': ['tok'], 'x-service-api-key': ['key_abc'] }, null, defaults))
    expect(error.code).toBe('CREDENTIALS_CONFLICT')
  })

  it('throws 400 CREDENTIALS_CONFLICT when x-api-key is repeated with different values', () => {
    const error = thrownBy(() => extractCredential({ 'x-api-key': ['key_a', 'key_b'] }, null, defaults))
    expect(error.code).toBe('CREDENTIALS_CONFLICT')
    expect(error.details).toEqual([{ pointer: 'header:x-api-key', message: 'presented twice with different values' }])
  })

  it('throws 400 CREDENTIALS_CONFLICT when authorization is repeated with different values', () => {
    expect(thrownBy(() => extractCredential({ authorization: ['Bearer a', 'Bearer b'] }, null, defaults)).code).toBe('CREDENTIALS_CONFLICT')
  })

  it('throws 400 CREDENTIALS_CONFLICT, not INVALID_CREDENTIAL_TYPE, when a key_ and an sa_ are presented together', () => {
    const error = thrownBy(() => extractCredential({ 'x-api-key': ['key_abc'], 'x-service-api-key': ['sa_abc'] }, null, defaults))
    expect(error.code).toBe('CREDENTIALS_CONFLICT')
  })

  it('throws 400 CREDENTIALS_CONFLICT, not AUTH_INVALID, when one of two different values is malformed', () => {
    const error = thrownBy(() => extractCredential({ authorization: ['Basic abc'], 'x-api-key': ['key_abc'] }, null, defaults))
    expect(error.code).toBe('CREDENTIALS_CONFLICT')
  })

  it('throws 400 CREDENTIALS_CONFLICT, not AUTH_INVALID, when an empty value meets a usable one', () => {
    const error = thrownBy(() => extractCredential({ 'x-session-token': [''], 'x-api-key': ['key_abc'] }, null, defaults))
    expect(error.code).toBe('CREDENTIALS_CONFLICT')
  })

  it('throws 401 AUTH_INVALID when the same value is usable in one header but malformed as authorization', () => {
    const error = thrownBy(() => extractCredential({ authorization: ['Bearer'], 'x-session-token': ['Bearer'] }, null, defaults))
    expect(error.code).toBe('AUTH_INVALID')
  })
})
