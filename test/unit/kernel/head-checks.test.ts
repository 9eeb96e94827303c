import { describe, expect, it } from 'vitest'
import { refuseHead } from '../../../src/kernel/head-checks.js'
import { headersFromRaw } from '../../../src/plan/head-from-input.js'

function head(lines: [string, string][], httpVersion = '1.1') {
  const rawHeaders = lines.flat()
  return { rawHeaders, headers: headersFromRaw(rawHeaders), httpVersion }
}

describe('refuseHead (RFC 9112 3.2, 6.1)', () => {
  it('passes a request with one Host', () => {
    expect(refuseHead(head([['Host', 'a.example']]))).toBeUndefined()
  })

  it('refuses an HTTP/1.1 request without Host, and lets HTTP/1.0 go without one', () => {
    expect(refuseHead(head([]))).toMatchObject({ code: 'INVALID_REQUEST', details: [{ pointer: 'header:host', message: 'missing' }] })
    expect(refuseHead(head([], '1.0'))).toBeUndefined()
  })

  it('refuses two Host lines, whatever their case', () => {
    expect(refuseHead(head([['Host', 'a'], ['HOST', 'b']]))).toMatchObject({ details: [{ message: 'sent more than once' }] })
  })

  it('refuses a transfer coding other than chunked alone', () => {
    expect(refuseHead(head([['host', 'a'], ['transfer-encoding', 'gzip, chunked']]))).toMatchObject({ details: [{ pointer: 'header:transfer-encoding' }] })
    expect(refuseHead(head([['host', 'a'], ['transfer-encoding', 'Chunked']]))).toBeUndefined()
  })
})
