import { GatewayError } from '../errors/registry.js'

export interface RequestTarget {
  /** As sent (percent-encoded): forwarded unchanged and matched against routes. */
  pathname: string
  /** Without "?"; "" for none. */
  rawQuery: string
  /**
   * Decoded, `;` segment parameters left out, slashes collapsed, lower-cased: only for the
   * blocked-prefix check. Octets that are not UTF-8 are left out of it (as a decoder that skips
   * them would read the path).
   */
  comparablePath: string
  /**
   * Only for a path with percent-encoded octets that are not UTF-8: the same, the path read one
   * octet per character (as a latin1 decoder would). Checked against the blocked prefixes too.
   */
  octetPath: string | undefined
}

const DOT_SEGMENT = /^(\.|%2e){1,2}$/i
// Paths with none of these are plain: nothing to decode, no dot segment, no slash to collapse, no `;` parameters.
const NEEDS_CHECKS = /[%.\\;]|\/\//
/** `%` not followed by two hex digits (RFC 3986 2.1): no reading of the path is certain. */
const MALFORMED_ESCAPE = /%(?![\dA-Fa-f]{2})/
const ESCAPE_RUN = /(?:%[\dA-Fa-f]{2})+/g
/** An overlong UTF-8 form of an ASCII character (`%C0%AE` for `.`): lenient decoders read it as that character. */
const OVERLONG_ASCII = /[\xC0\xC1][\x80-\xBF]|\xE0[\x80\x81][\x80-\xBF]|\xF0\x80[\x80\x81][\x80-\xBF]/

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
  if (!NEEDS_CHECKS.test(pathname)) return { pathname, rawQuery, comparablePath: pathname.toLowerCase(), octetPath: undefined }
  let decoded: string
  try {
    decoded = decodeURIComponent(pathname)
  } catch {
    // RFC 3986 2.1 allows any octet, and SPEC 7 passes the path on as it came (`file-%FF.bin`). An
    // upstream may read octets that are not UTF-8 as latin1 or skip them: both readings are checked.
    const readings = decodeOctets(pathname)
    return { pathname, rawQuery, comparablePath: comparable(pathname, readings.utf8), octetPath: comparable(pathname, readings.latin1) }
  }
  return { pathname, rawQuery, comparablePath: comparable(pathname, decoded), octetPath: undefined }
}

/** The decoded path for the blocked-prefix check; throws on a dot segment or a NUL, in the path as sent or decoded. */
function comparable(pathname: string, decoded: string): string {
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
  return (hasParameters ? segments.join('/') : decoded).replace(/[/\\]+/g, '/').toLowerCase()
}

/**
 * A path whose percent-encoded octets are not all UTF-8, decoded two ways: as UTF-8 with the
 * octets that are not UTF-8 left out, and one octet per character. Each run of escapes is
 * decoded on its own, as decodeURIComponent does; what is not escaped stays as it is.
 */
function decodeOctets(pathname: string): { utf8: string; latin1: string } {
  if (MALFORMED_ESCAPE.test(pathname)) {
    throw new GatewayError('INVALID_REQUEST', 'the request path is not valid percent-encoding', { details: [{ pointer: 'request-target', message: 'invalid percent-encoding' }] })
  }
  let utf8 = ''
  let latin1 = ''
  let plainStart = 0
  for (const run of pathname.matchAll(ESCAPE_RUN)) {
    const plain = pathname.slice(plainStart, run.index)
    const octets = Buffer.from(run[0].replaceAll('%', ''), 'hex')
    const asLatin1 = octets.toString('latin1')
    if (OVERLONG_ASCII.test(asLatin1)) {
      throw new GatewayError('INVALID_REQUEST', 'the request path holds an overlong UTF-8 form of an ASCII character', { details: [{ pointer: 'request-target', message: 'overlong UTF-8' }] })
    }
    // A replacement character never stands in for an ASCII octet (WHATWG decoding), so leaving
    // them out hides no `.`, `/`, `\` or `;` from the checks.
    utf8 += plain + octets.toString('utf8').replaceAll('\uFFFD', '')
    latin1 += plain + asLatin1
    plainStart = run.index + run[0].length
  }
  const rest = pathname.slice(plainStart)
  return { utf8: utf8 + rest, latin1: latin1 + rest }
}

function withoutSegmentParameters(segment: string): string {
  const semicolon = segment.indexOf(';')
  return semicolon === -1 ? segment : segment.slice(0, semicolon)
}
