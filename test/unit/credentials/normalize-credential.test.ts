import { describe, it, expect } from 'vitest'
import {
  redactQueryCredential,
  removeQueryCredential,
  resolveRuntimeAuthorization,
  rewriteProxyCredentialHeaders
} from '../../../src/credentials/index.js'
import type { PresentedCredential } from '../../../src/credentials/index.js'
import { thrownBy } from './fixtures.js'

const sessionToken: PresentedCredential = { value: 'tok123', kind: 'session-token', origins: ['x-session-token'] }
const serviceKey: PresentedCredential = { value: 'key_abc', kind: 'service-key', origins: ['authorization'] }
const serviceAccountId: PresentedCredential = { value: 'sa_abc', kind: 'service-account-id', origins: ['x-api-key'] }

describe('resolveRuntimeAuthorization', () => {
  it('throws 401 AUTH_INVALID saying a session token is missing when nothing is presented', () => {
    const error = thrownBy(() => resolveRuntimeAuthorization(null))
    expect(error.code).toBe('AUTH_INVALID')
    expect(error.statusCode).toBe(401)
    expect(error.message).toMatch(/session token is missing/)
  })

  it('throws 401 AUTH_INVALID saying a session token is missing when a service key is presented', () => {
    const error = thrownBy(() => resolveRuntimeAuthorization(serviceKey))
    expect(error.code).toBe('AUTH_INVALID')
    expect(error.message).toMatch(/session token is missing/)
  })

  it('throws 401 AUTH_INVALID saying service keys are for admin/config APIs only when a service key is presented', () => {
    expect(thrownBy(() => resolveRuntimeAuthorization(serviceKey)).message).toMatch(/service keys are for admin\/config APIs only/)
  })

  it('throws 401 INVALID_CREDENTIAL_TYPE saying it is an identifier when a service-account id is presented', () => {
    const error = thrownBy(() => resolveRuntimeAuthorization(serviceAccountId))
    expect(error.code).toBe('INVALID_CREDENTIAL_TYPE')
    expect(error.statusCode).toBe(401)
    expect(error.message).toMatch(/identifier, never a credential/)
  })

  it('returns exactly "Bearer <token>" for a session token from any source', () => {
    expect(resolveRuntimeAuthorization(sessionToken)).toBe('Bearer tok123')
  })
})

describe('rewriteProxyCredentialHeaders', () => {
  const incoming = {
    host: 'legacy.example',
    'content-type': 'application/json',
    authorization: 'Bearer key_abc',
    'x-session-token': 'key_abc',
    'x-api-key': 'key_abc',
    'x-service-api-key': 'key_abc',
    'x-request-id': 'req-1'
  }

  it('forwards a service key as x-service-api-key and removes every other credential header', () => {
    expect(rewriteProxyCredentialHeaders(incoming, serviceKey)).toEqual({
      host: 'legacy.example',
      'content-type': 'application/json',
      'x-request-id': 'req-1',
      'x-service-api-key': 'key_abc'
    })
  })

  it('forwards a session token as authorization: Bearer and removes every other credential header', () => {
    const headers = { 'x-session-token': 'tok123', 'x-api-key': 'tok123', accept: 'application/json' }
    expect(rewriteProxyCredentialHeaders(headers, sessionToken)).toEqual({ accept: 'application/json', authorization: 'Bearer tok123' })
  })

  it('forwards no credential header when nothing is presented', () => {
    expect(rewriteProxyCredentialHeaders(incoming, null)).toEqual({
      host: 'legacy.example',
      'content-type': 'application/json',
      'x-request-id': 'req-1'
    })
  })

  it('removes a credential header that arrived as an array of repeated values', () => {
    const headers = { 'x-api-key': ['key_abc', 'key_abc'], accept: 'text/plain' }
    expect(rewriteProxyCredentialHeaders(headers, serviceKey)).toEqual({ accept: 'text/plain', 'x-service-api-key': 'key_abc' })
  })

  it('removes credential headers whatever the case of their names', () => {
    const headers = { Authorization: 'Bearer key_abc', 'X-Api-Key': 'key_abc' }
    expect(rewriteProxyCredentialHeaders(headers, null)).toEqual({})
  })

  it('removes a credential header spelled with underscores and Proxy-Authorization, so exactly one credential goes on', () => {
    const headers = { x_service_api_key: 'key_other', X_API_KEY: 'key_other', x_session_token: 'tok_other', 'proxy-authorization': 'Bearer key_pp', accept: 'text/plain' }
    expect(rewriteProxyCredentialHeaders(headers, sessionToken)).toEqual({ accept: 'text/plain', authorization: 'Bearer tok123' })
  })

  it('throws 401 INVALID_CREDENTIAL_TYPE when a service-account id is presented', () => {
    const error = thrownBy(() => rewriteProxyCredentialHeaders(incoming, serviceAccountId))
    expect(error.code).toBe('INVALID_CREDENTIAL_TYPE')
    expect(error.statusCode).toBe(401)
  })

  it('never mutates the headers it is given', () => {
    const headers = { authorization: 'Bearer tok123', 'x-forwarded-for': ['10.0.0.1', '10.0.0.2'] }
    const snapshot = structuredClone(headers)
    const rewritten = rewriteProxyCredentialHeaders(headers, sessionToken)
    expect(headers).toEqual(snapshot)
    expect(rewritten).not.toBe(headers)
    expect(rewritten['x-forwarded-for']).not.toBe(headers['x-forwarded-for'])
  })

  it('keeps a header named __proto__ as an own header instead of changing the prototype', () => {
    const headers: Record<string, string> = JSON.parse('{"__proto__":"x","accept":"*/*"}') as Record<string, string>
    const rewritten = rewriteProxyCredentialHeaders(headers, null)
    expect(Object.getPrototypeOf(rewritten)).toBe(Object.prototype)
    expect(Object.keys(rewritten)).toEqual(['__proto__', 'accept'])
  })
})

describe('removeQueryCredential', () => {
  it('removes the credential parameter and keeps the others in order', () => {
    expect(removeQueryCredential('a=1&token=x&b=2', 'token')).toBe('a=1&b=2')
  })

  it('returns "" when the credential was the only parameter', () => {
    expect(removeQueryCredential('token=x', 'token')).toBe('')
  })

  it('removes every occurrence of a repeated credential parameter', () => {
    expect(removeQueryCredential('token=x&a=1&token=x', 'token')).toBe('a=1')
  })

  it('keeps the encoding of the other parameters byte for byte', () => {
    expect(removeQueryCredential('q=a%20b+c&token=x&r=%E2%9C%93&s', 'token')).toBe('q=a%20b+c&r=%E2%9C%93&s')
  })

  it('removes a credential parameter whose name is percent-encoded, as URLSearchParams reads it', () => {
    expect(removeQueryCredential('a=1&tok%65n=x', 'token')).toBe('a=1')
  })

  it('removes a credential parameter given without a value', () => {
    expect(removeQueryCredential('token&a=1', 'token')).toBe('a=1')
  })

  it('keeps a parameter whose name only starts with the credential name', () => {
    expect(removeQueryCredential('tokens=1&token=x', 'token')).toBe('tokens=1')
  })

  it('keeps a leading "?" when parameters are left', () => {
    expect(removeQueryCredential('?token=x&a=1', 'token')).toBe('?a=1')
  })

  it('returns "" for "?token=x"', () => {
    expect(removeQueryCredential('?token=x', 'token')).toBe('')
  })

  it('returns a query without the parameter as it came, empty segments included (SPEC 4: the query is kept)', () => {
    expect(removeQueryCredential('?a=1&&b=2&', 'token')).toBe('?a=1&&b=2&')
    expect(removeQueryCredential('a=1&&token=x', 'token')).toBe('a=1')
  })

  it('returns the query unchanged when queryParam is null', () => {
    expect(removeQueryCredential('a=1&token=x', null)).toBe('a=1&token=x')
  })

  it('returns "" for an empty query', () => {
    expect(removeQueryCredential('', 'token')).toBe('')
  })
})

describe('redactQueryCredential', () => {
  it('replaces the credential parameter value, however its name is encoded, and keeps the rest', () => {
    expect(redactQueryCredential('a=1&token=s3cret&tok%65n=x&b=2', 'token')).toBe('a=1&token=[redacted]&tok%65n=[redacted]&b=2')
  })

  it('leaves the query as it is when no query parameter is configured', () => {
    expect(redactQueryCredential('token=s3cret', null)).toBe('token=s3cret')
  })
})
