import { describe, expect, it } from 'vitest'
import { IDEMPOTENCY_DEFAULTS } from '../../../src/config/schema.js'
import type { RequestHead } from '../../../src/kernel/request-head.js'
import { buildIdempotencyRequest, readIdempotencyKey } from '../../../src/plan/idempotency-step.js'
import { canonicalJson } from '../../../src/util/canonical-json.js'

function head(key: string | undefined): RequestHead {
  return { startedAt: 0, now: 0, requestId: 'r', method: 'POST', url: '/v1/x', httpVersion: '1.1', headers: key === undefined ? {} : { 'idempotency-key': key }, rawHeaders: [], clientAddress: undefined, protocol: 'http' }
}

const LIMITS = { upstreamTimeoutMs: 30_000, connectTimeoutMs: 5_000 }
const INPUT = { tenant: 'acme', credentialHash: 'c'.repeat(64), route: 'POST /v1/x', method: 'POST', params: {}, query: '', stateKey: '', body: { input: 1 } }

describe('SPEC 16 idempotency step', () => {
  it('reads nothing when the route has no idempotency or the request no key', () => {
    expect(readIdempotencyKey(null, head('k'))).toBeUndefined()
    expect(readIdempotencyKey(IDEMPOTENCY_DEFAULTS, head(undefined))).toBeUndefined()
  })

  it.each([
    ['abc', 'abc'],
    ['"abc"', 'abc'],
    ['"a\\"b\\\\c"', 'a"b\\c'],
    ['"abc', '"abc']
  ])('reads key %s as %s (an RFC 8941 sf-string is its content)', (sent, key) => {
    expect(readIdempotencyKey(IDEMPOTENCY_DEFAULTS, head(sent))?.key).toBe(key)
  })

  it.each(['', 'a b', '"a b"', 'é', 'x'.repeat(256)])('refuses key %j with 400 INVALID_REQUEST', (sent) => {
    expect(() => readIdempotencyKey(IDEMPOTENCY_DEFAULTS, head(sent))).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST' }))
  })

  it('names the record by hashes only: neither the key nor the credential hash appears in it', () => {
    const request = buildIdempotencyRequest({ key: 'my-key', settings: IDEMPOTENCY_DEFAULTS }, INPUT, LIMITS)
    expect(request.recordKey).toMatch(/^[0-9a-f]{64}$/)
    expect(request.fingerprint).toMatch(/^[0-9a-f]{64}$/)
    expect(request.leaseMs).toBe(70_000)
  })

  it('refuses a body too deep for the fingerprint with the 400 of a body too deep to send, not a RangeError (a 500)', () => {
    const keyed = { key: 'k', settings: IDEMPOTENCY_DEFAULTS }
    let input: unknown = 1
    // JSON.parse reads any depth; the fingerprint's recursion runs out of stack far before this.
    for (let level = 0; level < 200_000; level++) input = [input]
    expect(() => buildIdempotencyRequest(keyed, { ...INPUT, body: { input } }, LIMITS)).toThrow(
      expect.objectContaining({ code: 'INVALID_REQUEST', statusCode: 400, message: 'request body is nested too deeply to pass on' })
    )
  })

  it('gives another fingerprint for another method or path parameter (SPEC 16: { method, route, params, query, stateKey, body })', () => {
    const keyed = { key: 'k', settings: IDEMPOTENCY_DEFAULTS }
    const base = buildIdempotencyRequest(keyed, { ...INPUT, params: { runId: 'r-1' } }, LIMITS).fingerprint
    expect(buildIdempotencyRequest(keyed, { ...INPUT, params: { runId: 'r-1' } }, LIMITS).fingerprint).toBe(base)
    expect(buildIdempotencyRequest(keyed, { ...INPUT, params: { runId: 'r-2' } }, LIMITS).fingerprint).not.toBe(base)
    expect(buildIdempotencyRequest(keyed, { ...INPUT, params: { runId: 'r-1' }, method: 'PUT' }, LIMITS).fingerprint).not.toBe(base)
  })

  it('gives one fingerprint for bodies that differ only in member order, another for another body, query or state key', () => {
    const keyed = { key: 'k', settings: IDEMPOTENCY_DEFAULTS }
    const base = buildIdempotencyRequest(keyed, { ...INPUT, body: { input: 1, policy: 'p' } }, LIMITS).fingerprint
    expect(buildIdempotencyRequest(keyed, { ...INPUT, body: { policy: 'p', input: 1 } }, LIMITS).fingerprint).toBe(base)
    expect(buildIdempotencyRequest(keyed, { ...INPUT, body: { input: 2, policy: 'p' } }, LIMITS).fingerprint).not.toBe(base)
    expect(buildIdempotencyRequest(keyed, { ...INPUT, body: { input: 1, policy: 'p' }, query: 'a=1' }, LIMITS).fingerprint).not.toBe(base)
    expect(buildIdempotencyRequest(keyed, { ...INPUT, body: { input: 1, policy: 'p' }, stateKey: 's' }, LIMITS).fingerprint).not.toBe(base)
  })

  it('names another record for another credential, tenant or route', () => {
    const keyed = { key: 'k', settings: IDEMPOTENCY_DEFAULTS }
    const base = buildIdempotencyRequest(keyed, INPUT, LIMITS).recordKey
    expect(buildIdempotencyRequest(keyed, { ...INPUT, credentialHash: 'd'.repeat(64) }, LIMITS).recordKey).not.toBe(base)
    expect(buildIdempotencyRequest(keyed, { ...INPUT, tenant: 'beta' }, LIMITS).recordKey).not.toBe(base)
    expect(buildIdempotencyRequest(keyed, { ...INPUT, route: 'POST /v1/y' }, LIMITS).recordKey).not.toBe(base)
  })
})

describe('RFC 8785 canonical JSON', () => {
  it('sorts members by UTF-16 code units and writes numbers and strings as ECMAScript does', () => {
    expect(canonicalJson({ b: [1e21, 0.1, -0], a: 'é\n', '\u20ac': 1, '\ud83d\ude00': 2, '1': null })).toBe('{"1":null,"a":"é\\n","b":[1e+21,0.1,0],"€":1,"😀":2}')
  })

  it('puts a name of U+E000-U+FFFF after one above U+FFFF, as UTF-16 units order them (RFC 8785 3.2.3, its own example)', () => {
    // By code points U+FB33 comes first; by UTF-16 units the surrogate 0xD83D does.
    expect(canonicalJson({ '\ufb33': 1, '\ud83d\ude00': 2 })).toBe('{"😀":2,"\ufb33":1}')
  })
})
