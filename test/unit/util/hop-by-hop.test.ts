import { describe, expect, it } from 'vitest'
import { connectionOptions, isHopByHop, stripHopByHop } from '../../../src/util/hop-by-hop.js'

describe('hop-by-hop headers (RFC 9110 7.6.1)', () => {
  it('reads the field names a Connection header lists, lower-cased, from one or several values', () => {
    expect(connectionOptions('Keep-Alive, X-Trace ,x-debug')).toEqual(['keep-alive', 'x-trace', 'x-debug'])
    expect(connectionOptions(['close', 'X-Trace'])).toEqual(['close', 'x-trace'])
    expect(connectionOptions(undefined)).toEqual([])
  })

  it('treats the common keep-alive and close values as naming nothing beyond the standard set', () => {
    for (const value of ['keep-alive', 'close']) {
      const listed = connectionOptions(value)
      expect(listed).toEqual([])
      expect(isHopByHop('keep-alive', listed)).toBe(true)
      expect(isHopByHop('content-type', listed)).toBe(false)
    }
  })

  it('strips the standard hop-by-hop fields and those the Connection header names', () => {
    expect(stripHopByHop({ connection: 'close, x-trace', 'x-trace': '1', 'transfer-encoding': 'chunked', te: 'trailers', 'content-type': 'application/json' })).toEqual({
      'content-type': 'application/json'
    })
  })

  it('leaves out the fields it is also given, and copies the rest in the order they came', () => {
    const copy = stripHopByHop({ host: 'gw', 'content-type': 'application/json', expect: '100-continue', 'x-trace': '1', te: 'trailers' }, new Set(['host', 'expect']))
    expect(Object.keys(copy)).toEqual(['content-type', 'x-trace'])
  })
})
