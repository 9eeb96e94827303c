import { errors } from 'undici'
import { describe, expect, it } from 'vitest'
import { mapUpstreamError, upstreamFailureCause } from '../../../src/upstream/map-upstream-error.js'

/** undici's own error classes: a connect timeout cannot be produced over loopback, where TCP handshakes never stall. */
function withCode(code: string): Error {
  return Object.assign(new Error(code), { code })
}

describe('mapUpstreamError', () => {
  it.each([
    ['a connect timeout (limits.connectTimeoutMs)', new errors.ConnectTimeoutError()],
    ['a headers timeout (limits.upstreamTimeoutMs)', new errors.HeadersTimeoutError()],
    ['a body timeout (limits.upstreamTimeoutMs)', new errors.BodyTimeoutError()]
  ])('answers 504 UPSTREAM_TIMEOUT for %s', (_name, error) => {
    const mapped = mapUpstreamError(error)
    expect(mapped.code).toBe('UPSTREAM_TIMEOUT')
    expect(mapped.statusCode).toBe(504)
    expect(mapped.cause).toBe(error)
  })

  it.each([
    ['a refused connection', withCode('ECONNREFUSED')],
    ['a reset', withCode('ECONNRESET')],
    ['a DNS failure', withCode('ENOTFOUND')],
    ['a closed socket', new errors.SocketError('other side closed')]
  ])('answers 502 UPSTREAM_UNAVAILABLE for %s', (_name, error) => {
    expect(mapUpstreamError(error).code).toBe('UPSTREAM_UNAVAILABLE')
  })

  it('answers 502 UPSTREAM_BAD_RESPONSE for an answer undici could not parse, known by name since it has no code', () => {
    // As undici 7 raises it from its HTTP/1 parser: the numeric-to-name lookup leaves `code` undefined.
    const error = new errors.HTTPParserError('Response does not match the HTTP/1.1 protocol')
    expect(mapUpstreamError(error).code).toBe('UPSTREAM_BAD_RESPONSE')
  })

  it('looks through causes, as wrapped errors carry the original below', () => {
    const wrapped = new Error('fetch failed', { cause: new errors.ConnectTimeoutError() })
    expect(mapUpstreamError(wrapped).code).toBe('UPSTREAM_TIMEOUT')
  })

  it.each([
    ['a closed pool', new errors.ClientClosedError()],
    ['a destroyed pool', new errors.ClientDestroyedError()]
  ])('answers 503 SHUTTING_DOWN for a call dispatched into %s (only the shutdown does that): no upstream failure', (_name, error) => {
    const mapped = mapUpstreamError(error)
    expect(mapped.code).toBe('SHUTTING_DOWN')
    expect(mapped.statusCode).toBe(503)
    expect(upstreamFailureCause(mapped)).toBeUndefined()
  })

  it('treats anything it does not know as an upstream that could not be used', () => {
    expect(mapUpstreamError('weird').code).toBe('UPSTREAM_UNAVAILABLE')
  })
})
