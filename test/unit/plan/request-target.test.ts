import { describe, expect, it } from 'vitest'
import { assertNotBlocked, type ClassificationNote } from '../../../src/plan/classify-request.js'
import { parseRequestTarget } from '../../../src/plan/request-target.js'
import type { GatewayRuntime } from '../../../src/tenancy/gateway-runtime.js'

describe('parseRequestTarget', () => {
  it('splits a plain origin-form target into path and query', () => {
    expect(parseRequestTarget('/v4/x?a=1')).toEqual({ pathname: '/v4/x', rawQuery: 'a=1', comparablePath: '/v4/x' })
  })

  it.each(['/v4/x?a=1#frag', '/v4/x#frag', '/v4/x#', '/v4/%2e#x', '/internal#frag'])('refuses %j: origin-form has no fragment (RFC 9112 3.2.1)', (url) => {
    expect(() => parseRequestTarget(url)).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST', details: [{ pointer: 'request-target', message: 'contains #' }] }))
  })

  it('keeps an encoded # (%23), which is data', () => {
    expect(parseRequestTarget('/v4/a%23b?q=%23')).toMatchObject({ pathname: '/v4/a%23b', rawQuery: 'q=%23' })
  })

  it('passes on a path with percent-encoded octets that are not UTF-8 as it came (RFC 3986 2.1, SPEC 7)', () => {
    const target = parseRequestTarget('/v4/files/file-%FF%FE.bin?x=%FF')
    expect(target).toEqual({ pathname: '/v4/files/file-%FF%FE.bin', rawQuery: 'x=%FF', comparablePath: '/v4/files/file-.bin', octetPath: '/v4/files/file-\u00ff\u00fe.bin' })
  })

  it('reads a run of escapes that mixes UTF-8 and other octets both ways', () => {
    expect(parseRequestTarget('/v4/%C3%A9%FF/%41')).toMatchObject({ comparablePath: '/v4/\u00e9/a', octetPath: '/v4/\u00e3\u00a9\u00ff/a' })
  })

  it.each([
    '/v4/%FF/../internal', '/v4/%FF/%2e%2e/internal', '/v4/%FF%2e%2e/internal', '/v4/%2e%2e%FF/internal', '/v4/%E0%2e%2e/internal', '/v4/%FF/..;/internal',
    '/v4/%FF%2f%2e%2e%2finternal', '/v4/%FF%5c..%5cinternal'
  ])('still refuses the dot segment in %j, whichever way the octets are read', (url) => {
    expect(() => parseRequestTarget(url)).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST', details: [{ pointer: 'request-target', message: 'contains . or .. segments' }] }))
  })

  it.each(['/v4/%c0%ae%c0%ae/internal', '/v4/%C0%AF', '/v4/%e0%80%ae', '/v4/%f0%80%80%ae', '/v4/%c1%9c'])('refuses the overlong UTF-8 form of an ASCII character in %j', (url) => {
    expect(() => parseRequestTarget(url)).toThrow(expect.objectContaining({ details: [{ pointer: 'request-target', message: 'overlong UTF-8' }] }))
  })

  it.each(['/v4/%', '/v4/%zz', '/v4/%F', '/v4/%FF%G0'])('refuses %j, whose escapes are malformed', (url) => {
    expect(() => parseRequestTarget(url)).toThrow(expect.objectContaining({ details: [{ pointer: 'request-target', message: 'invalid percent-encoding' }] }))
  })

  it('refuses a NUL next to octets that are not UTF-8', () => {
    expect(() => parseRequestTarget('/v4/%FF%00')).toThrow(expect.objectContaining({ details: [{ pointer: 'request-target', message: 'contains NUL' }] }))
  })

  it.each([
    ['/%69nternal/%FF', '/internal/'],
    ['/INTERN%FFAL/x', '/internal/x'],
    ['/v4/%FF;x/internal', '/v4/internal'],
    ['/v4%2F%FFinternal', '/v4/internal']
  ])('lets the blocked-prefix check see %j as %j once the other octets are left out', (url, start) => {
    expect(parseRequestTarget(url).comparablePath.startsWith(start)).toBe(true)
  })
})

describe('assertNotBlocked on a path with octets that are not UTF-8', () => {
  const runtime = { blockedPrefixes: ['/internal', '/v4/intérnal'] } as unknown as GatewayRuntime
  const note = (): ClassificationNote => ({ trafficClass: undefined, tenant: undefined })

  it.each(['/internal%FF', '/intern%FFal/x', '/%FFinternal', '/v4/int%E9rnal/keys', '/v4/int%C3%A9rnal%FF'])('answers 403 to %j, read either way', (url) => {
    const noted = note()
    expect(() => assertNotBlocked(runtime, parseRequestTarget(url), noted)).toThrow(expect.objectContaining({ code: 'FORBIDDEN' }))
    expect(noted.trafficClass).toBe('blocked')
  })

  it('lets the issue\'s file name through', () => {
    expect(() => assertNotBlocked(runtime, parseRequestTarget('/v4/files/file-%FF%FE.bin'), note())).not.toThrow()
  })
})
