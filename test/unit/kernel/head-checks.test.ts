import { describe, expect, it } from 'vitest'
import { refuseHead } from '../../../src/kernel/head-checks.js'
import { isValidHost } from '../../../src/util/host-syntax.js'
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

  it('refuses a Host whose port is not digits, or with a second port (RFC 9110 7.2, RFC 3986 3.2.3)', () => {
    for (const host of ['example.com.:1.2', '123.40.56.78:9000:80', 'a.example:80x', 'a.example:-1', '[::1]:80:81', '[::1]x']) {
      expect(refuseHead(head([['Host', host]])), host).toMatchObject({ code: 'INVALID_REQUEST', details: [{ pointer: 'header:host', message: expect.stringContaining('RFC 3986') }] })
    }
  })

  it('checks the Host of an HTTP/1.0 request too, when it sends one', () => {
    expect(refuseHead(head([['Host', '123.40.56.78:9000:80']], '1.0'))).toMatchObject({ details: [{ pointer: 'header:host' }] })
  })
})

describe('isValidHost (uri-host [ ":" port ])', () => {
  it.each([
    'example.com', 'EXAMPLE.com:8080', 'example.com.', 'example.com.:8443', '127.0.0.1', '127.0.0.1:9000', 'a_b.example', 'xn--bcher-kva.example',
    '%41.example', "a!$&'()*+,;=b", '', 'example.com:', 'example.com:99999',
    '[::1]', '[::1]:', '[::1]:8080', '[2001:DB8::1]:443', '[::ffff:127.0.0.1]', '[fe80::1%25eth0]:80', '[v1.fe80::a+en1]'
  ])('accepts %j', (host) => {
    expect(isValidHost(host)).toBe(true)
  })

  it.each([
    'example.com.:1.2', '123.40.56.78:9000:80', 'user:secret@example.com', 'user@example.com', 'a b', 'a/b', 'a?b', 'a#b', 'a\\b', 'bücher.example', '%4', '%zz.example',
    '::1', '[::1', '::1]', '[::1]:8080:1', '[::g]', '[1.2.3.4]', '[fe80::1%eth0]', '[]', '[v1.]', 'example.com:+80', 'example.com: 80'
  ])('refuses %j', (host) => {
    expect(isValidHost(host)).toBe(false)
  })
})
