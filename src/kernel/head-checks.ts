import { GatewayError } from '../errors/registry.js'
import { isValidHost } from '../util/host-syntax.js'
import type { RequestHead } from './request-head.js'

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
