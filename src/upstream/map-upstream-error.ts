import { GatewayError, isGatewayError } from '../errors/registry.js'

/**
 * The code of the error the pool's calls fail with when the grace period ends (SPEC 9): the
 * gateway cut them, no upstream failed, so none is an upstream failure (SPEC 17).
 */
const CUT_AT_SHUTDOWN = 'V4GW_CUT_AT_SHUTDOWN'

/** The error the gateway cuts its upstream calls with at the end of the grace period. */
export function cutAtShutdownError(): Error {
  return Object.assign(new Error('the gateway is shutting down'), { code: CUT_AT_SHUTDOWN })
}

/** undici and Node socket error codes, and what the client is told (SPEC 6). */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT'])
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL',
  'UND_ERR_SOCKET'
])

/**
 * undici's codes for a call dispatched into a pool already closed or destroyed, which only the
 * gateway's shutdown does (SPEC 9): the call was never sent. A call that outlived its client (a
 * keyed one, SPEC 16; one waiting on a shared `sessions.start`) can come to its next call then.
 */
const POOL_GONE_CODES = new Set(['UND_ERR_CLOSED', 'UND_ERR_DESTROYED'])

/**
 * An answer undici would not take: it came, so the upstream was reached, but it cannot be read
 * (SPEC 6 UPSTREAM_BAD_RESPONSE). A header section over the size limit, a body shorter than its
 * length, and the socket errors undici raises for a 100 it did not ask for (the gateway never
 * sends `Expect` upstream) or a 101 to a request that asked for no upgrade.
 */
const BAD_ANSWER_CODES = new Set(['UND_ERR_HEADERS_OVERFLOW', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'UND_ERR_RES_EXCEEDED_MAX_SIZE'])
const BAD_ANSWER_SOCKET_MESSAGES = new Set(['bad response', 'bad upgrade'])

function isBadAnswer(error: unknown): boolean {
  let current: unknown = error
  for (let depth = 0; depth < 5 && current !== null && typeof current === 'object'; depth++) {
    const { code, message } = current as { code?: unknown; message?: unknown }
    if (typeof code === 'string' && BAD_ANSWER_CODES.has(code)) return true
    if (code === 'UND_ERR_SOCKET' && typeof message === 'string' && BAD_ANSWER_SOCKET_MESSAGES.has(message)) return true
    current = (current as { cause?: unknown }).cause
  }
  return false
}

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
  // The gateway cut the call itself at the end of the grace period: its shutdown, not the upstream's
  // failure (SPEC 17), on the line of a call that outlived its client (a keyed one, SPEC 16).
  if (codes.includes(CUT_AT_SHUTDOWN)) return new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down; the upstream call was cut', { cause: error })
  if (codes.some((code) => POOL_GONE_CODES.has(code))) {
    return new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down; the upstream call was not sent', { cause: error })
  }
  if (codes.some((code) => TIMEOUT_CODES.has(code))) {
    return new GatewayError('UPSTREAM_TIMEOUT', 'the upstream did not answer in time', { cause: error })
  }
  if (codes.some((code) => code.startsWith('HPE_')) || isBadAnswer(error)) {
    return new GatewayError('UPSTREAM_BAD_RESPONSE', 'the upstream answer could not be read', { cause: error })
  }
  const known = codes.find((code) => UNAVAILABLE_CODES.has(code))
  return new GatewayError('UPSTREAM_UNAVAILABLE', known === undefined ? 'the upstream could not be reached' : `the upstream could not be reached (${known})`, { cause: error })
}

/**
 * An upstream failure after its response headers arrived: the upstream was reachable, so a body
 * that breaks off (a reset, a closed connection) is a bad answer, not an unavailable upstream.
 */
export function mapUpstreamErrorAfterHeaders(error: unknown): GatewayError {
  const mapped = mapUpstreamError(error)
  return mapped.code === 'UPSTREAM_UNAVAILABLE' ? new GatewayError('UPSTREAM_BAD_RESPONSE', 'the upstream answer broke off before its end', { cause: error }) : mapped
}

/** Why an upstream call failed, as SPEC 17's `cause` label names it. */
export type UpstreamFailureCause = 'refused' | 'reset' | 'timeout' | 'bad_response' | 'dns'

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN'])

/**
 * The cause of an upstream failure the gateway answered (SPEC 17), or undefined for an error
 * that is not one: from the gateway code, and for an unreachable upstream from the socket error
 * it kept as `cause`. Whatever else cut the connection (a reset, a close, an unreachable host)
 * is a reset.
 */
export function upstreamFailureCause(error: GatewayError): UpstreamFailureCause | undefined {
  // A call the gateway cut itself is SHUTTING_DOWN (mapUpstreamError), no upstream failure: its
  // error says so, since a call can outlive its client (a shared sessions.start, a keyed call).
  switch (error.code) {
    case 'UPSTREAM_TIMEOUT':
      return 'timeout'
    case 'UPSTREAM_BAD_RESPONSE':
      return 'bad_response'
    case 'UPSTREAM_UNAVAILABLE': {
      const codes = errorCodes(error.cause)
      if (codes.includes('ECONNREFUSED')) return 'refused'
      if (codes.some((code) => DNS_CODES.has(code))) return 'dns'
      return 'reset'
    }
    default:
      return undefined
  }
}
