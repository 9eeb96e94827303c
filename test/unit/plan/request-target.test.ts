import { describe, expect, it } from 'vitest'
import { parseRequestTarget } from '../../../src/plan/request-target.js'

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
})
