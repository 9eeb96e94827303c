import { GatewayError, isGatewayError } from '../errors/registry.js'

/** undici and Node socket error codes, and what the client is told (SPEC 6). */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT'])
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL',
  'UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'UND_ERR_DESTROYED'
])

function errorCodes(error: unknown): string[] {
  const codes: string[] = []
  let current: unknown = error
  for (let depth = 0; depth < 5 && current !== null && typeof current === 'object'; depth++) {
    const code = (current as { code?: unknown }).code
    if (typeof code === 'string') codes.push(code)
    // undici 7's HTTPParserError has no string code: it is known by name.
    else if ((current as { name?: unknown }).name === 'HTTPParserError') codes.push('HPE_UNKNOWN')
    current = (current as { cause?: unknown }).cause
  }
  return codes
}

/**
 * The one place that turns undici and Node socket errors into gateway errors. Total: anything
 * unrecognised is an upstream that could not be used. Keeps the original as `cause`.
 */
export function mapUpstreamError(error: unknown): GatewayError {
  if (isGatewayError(error)) return error
  const codes = errorCodes(error)
  if (codes.some((code) => TIMEOUT_CODES.has(code))) {
    return new GatewayError('UPSTREAM_TIMEOUT', 'the upstream did not answer in time', { cause: error })
  }
  if (codes.some((code) => code.startsWith('HPE_'))) {
    return new GatewayError('UPSTREAM_BAD_RESPONSE', 'the upstream answer could not be read', { cause: error })
  }
  const known = codes.find((code) => UNAVAILABLE_CODES.has(code))
  return new GatewayError('UPSTREAM_UNAVAILABLE', known === undefined ? 'the upstream could not be reached' : `the upstream could not be reached (${known})`, { cause: error })
}
