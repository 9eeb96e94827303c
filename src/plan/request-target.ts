import { GatewayError } from '../errors/registry.js'

export interface RequestTarget {
  /** As sent (percent-encoded): forwarded unchanged and matched against routes. */
  pathname: string
  /** Without "?"; "" for none. */
  rawQuery: string
  /** Decoded, `;` segment parameters left out, slashes collapsed, lower-cased: only for the blocked-prefix check. */
  comparablePath: string
}

const DOT_SEGMENT = /^(\.|%2e){1,2}$/i
// Paths with none of these are plain: nothing to decode, no dot segment, no slash to collapse, no `;` parameters.
const NEEDS_CHECKS = /[%.\\;]|\/\//

/**
 * Splits and checks the request target. Only origin-form is served: an absolute-form target
 * (RFC 9112 3.2.2) would let a client name the destination, and this is never an open proxy
 * (SPEC 2). Dot segments, raw or encoded, are refused rather than resolved, so that no
 * spelling of a path can walk into a blocked prefix.
 */
export function parseRequestTarget(url: string): RequestTarget {
  if (!url.startsWith('/')) {
    throw new GatewayError('INVALID_REQUEST', 'only origin-form request targets are served: this gateway is not a forward proxy', {
      details: [{ pointer: 'request-target', message: 'expected a path starting with /' }]
    })
  }
  // RFC 9112 3.2.1: origin-form is a path and a query; a fragment is the client's alone and never sent.
  if (url.includes('#')) {
    throw new GatewayError('INVALID_REQUEST', 'the request target carries a fragment, which a request never sends', { details: [{ pointer: 'request-target', message: 'contains #' }] })
  }
  const queryStart = url.indexOf('?')
  const pathname = queryStart === -1 ? url : url.slice(0, queryStart)
  const rawQuery = queryStart === -1 ? '' : url.slice(queryStart + 1)
  if (!NEEDS_CHECKS.test(pathname)) return { pathname, rawQuery, comparablePath: pathname.toLowerCase() }
  let decoded: string
  try {
    decoded = decodeURIComponent(pathname)
  } catch {
    throw new GatewayError('INVALID_REQUEST', 'the request path is not valid percent-encoding', { details: [{ pointer: 'request-target', message: 'invalid percent-encoding' }] })
  }
  // Servlet-style stacks drop a segment's `;` parameters before they resolve dot segments, so
  // `..;` and `/;x/` are read as `..` and `//` there: both checks see segments without them.
  const hasParameters = decoded.includes(';')
  const segments = decoded.split(/[/\\]/)
  if (hasParameters) for (let index = 0; index < segments.length; index++) segments[index] = withoutSegmentParameters(segments[index] as string)
  if (pathname.split('/').some((segment) => DOT_SEGMENT.test(segment)) || segments.some((segment) => segment === '.' || segment === '..')) {
    throw new GatewayError('INVALID_REQUEST', 'dot segments are not allowed in the request path', { details: [{ pointer: 'request-target', message: 'contains . or .. segments' }] })
  }
  if (decoded.includes('\0')) {
    throw new GatewayError('INVALID_REQUEST', 'the request path contains a NUL byte', { details: [{ pointer: 'request-target', message: 'contains NUL' }] })
  }
  return { pathname, rawQuery, comparablePath: (hasParameters ? segments.join('/') : decoded).replace(/[/\\]+/g, '/').toLowerCase() }
}

function withoutSegmentParameters(segment: string): string {
  const semicolon = segment.indexOf(';')
  return semicolon === -1 ? segment : segment.slice(0, semicolon)
}
