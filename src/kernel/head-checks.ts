import { isIPv6 } from 'node:net'
import { GatewayError } from '../errors/registry.js'
import type { RequestHead } from './request-head.js'

/**
 * RFC 9110 7.2: `Host = uri-host [ ":" port ]`, with RFC 3986's `host` (an IP literal in
 * brackets, or a reg-name, which an IPv4 address also is) and `port = *DIGIT`. One colon at
 * most outside the brackets, digits alone after it, no userinfo, no space, no byte outside
 * ASCII. An empty value is valid (a target without authority), as are a trailing dot and an
 * empty or out-of-range port (RFC 3986 bounds neither).
 */
const REG_NAME_HOST = /^(?:[\w.~!$&'()*+,;=-]|%[\dA-Fa-f]{2})*(?::\d*)?$/
const IP_LITERAL_HOST = /^\[([\w.:~!$&'()*+,;=%-]+)\](?::\d*)?$/
/** RFC 3986 IPvFuture; otherwise an IP literal is an IPv6 address, with an RFC 6874 zone (`%25`) if any. */
const IP_FUTURE = /^v[\dA-Fa-f]+\.[\w.:~!$&'()*+,;=-]+$/i
const ZONE = /^%25(?:[\w.~-]|%[\dA-Fa-f]{2})+$/

/**
 * What the kernel refuses of a request's head before anything is planned, or undefined. Each
 * refusal closes the connection: the framing of what follows cannot be trusted.
 */
export function refuseHead(head: Pick<RequestHead, 'headers' | 'rawHeaders' | 'httpVersion'>): GatewayError | undefined {
  // RFC 9112 3.2: an HTTP/1.1 request without Host, with more than one, or with an invalid one, is answered 400.
  const hostProblem = checkHost(head)
  if (hostProblem !== undefined) {
    return new GatewayError('INVALID_REQUEST', `an HTTP/1.1 request needs exactly one valid Host header`, { details: [{ pointer: 'header:host', message: hostProblem }] })
  }
  // RFC 9112 6.1: Node de-chunks a `gzip, chunked` body but leaves it gzip-coded, and the
  // header goes as hop-by-hop: the upstream would read coded bytes as the body itself.
  const codings = head.headers['transfer-encoding']
  if (codings !== undefined && codings.toLowerCase() !== 'chunked') {
    return new GatewayError('INVALID_REQUEST', 'the only transfer coding served is chunked', { details: [{ pointer: 'header:transfer-encoding', message: 'expected chunked alone' }] })
  }
  return undefined
}

/** Why the request's Host is not usable (RFC 9112 3.2), or undefined. Node keeps only the first of two. */
function checkHost(head: Pick<RequestHead, 'headers' | 'rawHeaders' | 'httpVersion'>): string | undefined {
  const host = head.headers.host
  if (host === undefined) return head.httpVersion === '1.1' ? 'missing' : undefined
  const raw = head.rawHeaders
  let seen = 0
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index] as string
    if (name.length === 4 && name.toLowerCase() === 'host' && ++seen > 1) return 'sent more than once'
  }
  return isValidHost(host) ? undefined : 'expected host or host:port (RFC 3986)'
}

/** Whether a Host value is `uri-host [ ":" port ]` (RFC 9110 7.2, RFC 3986 3.2.2-3.2.3). */
export function isValidHost(host: string): boolean {
  // One test and no allocation for a name; an IP literal (`[`) is rare enough to be taken apart.
  if (host.charCodeAt(0) !== 0x5b) return REG_NAME_HOST.test(host)
  const literal = IP_LITERAL_HOST.exec(host)?.[1]
  if (literal === undefined) return false
  if (IP_FUTURE.test(literal)) return true
  const zone = literal.indexOf('%')
  return isIPv6(zone === -1 ? literal : literal.slice(0, zone)) && (zone === -1 || ZONE.test(literal.slice(zone)))
}
