import { describe, expect, it } from 'vitest'
import { forwardedHeaders } from '../../../src/util/forwarded-headers.js'
import { appendLink } from '../../../src/util/link-header.js'

describe('forwardedHeaders', () => {
  it('appends the client address to an incoming list, repeated headers included', () => {
    expect(forwardedHeaders({ 'x-forwarded-for': ['10.0.0.1', '10.0.0.2'], host: 'gw.test' }, '127.0.0.1', 'http')).toEqual({
      'x-forwarded-for': '10.0.0.1, 10.0.0.2, 127.0.0.1',
      'x-forwarded-proto': 'http',
      'x-forwarded-host': 'gw.test'
    })
  })

  it('starts the list with the client address, and leaves out x-forwarded-host without a Host', () => {
    expect(forwardedHeaders({ 'x-forwarded-for': '' }, undefined, 'http')).toEqual({ 'x-forwarded-for': 'unknown', 'x-forwarded-proto': 'http' })
  })
})

describe('appendLink', () => {
  it('keeps the upstream links before the appended one (RFC 8288 3)', () => {
    expect(appendLink(['<a>; rel="next"', '<b>; rel="prev"'], '<d>; rel="deprecation"')).toBe('<a>; rel="next", <b>; rel="prev", <d>; rel="deprecation"')
    expect(appendLink(undefined, '<d>; rel="deprecation"')).toBe('<d>; rel="deprecation"')
  })
})
