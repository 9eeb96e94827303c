import type { Logger } from 'pino'
import { ownLineFormat } from './logger.js'

/**
 * One access-log line's fields (SPEC 9, 17), in the order they are written; an undefined field is
 * left out, as pino leaves it out.
 */
export interface AccessLogFields {
  requestId: string
  /**
   * The trace id (SPEC 17): with tracing on, the trace of the request's SERVER span; otherwise
   * that of a valid incoming `traceparent`.
   */
  traceId?: string | undefined
  /** The request's SERVER span, with tracing on (SPEC 17: logs and traces join on traceId and spanId). */
  spanId?: string | undefined
  method?: string | undefined
  /** The request target's path, never its query (a credential can ride there, SPEC 5). */
  path?: string | undefined
  tenant: string | undefined
  /** The tenant a TENANT_UNKNOWN request asked for (SPEC 17: the line says what was asked for). */
  requestedTenant?: string | undefined
  class: string | undefined
  route: string | undefined
  v4Path: string | undefined
  /** SPEC 12's client id of a legacy request (SPEC 17): `fp:…`, `hdr:…`, `hdr#…` or `anonymous`, never a credential. */
  clientId?: string | undefined
  /** SPEC 14's effective stage of a legacy request (SPEC 17). */
  stage?: string | undefined
  /** SPEC 14's `x-v4gw-served-by` of a legacy answer, on tenants that use stages (SPEC 17). */
  servedBy?: string | undefined
  /** SPEC 13's action on a deprecated legacy route: header, brownout, gone or exempt (SPEC 17). */
  deprecation?: string | undefined
  status: number
  durationMs: number
  upstreamMs: number | undefined
  /** Response body bytes sent to the client. */
  bytesOut?: number | undefined
  session: string | undefined
  /** SPEC 16's outcome of a request that carried an idempotency key (SPEC 17). */
  idempotency?: string | undefined
  error: string | undefined
  /** SPEC 17: what made an upstream call fail (`refused`, `reset`, `timeout`, `bad_response`, `dns`), beside its `error` code. */
  cause?: string | undefined
  clientAddress?: string | undefined
  /** At most USER_AGENT_MAX_CHARS characters. */
  userAgent?: string | undefined
}

export type AccessLog = (fields: AccessLogFields) => void

/** SPEC 17: `userAgent` is cut to this many characters. */
export const USER_AGENT_MAX_CHARS = 256

const INFO = 30

/** Whether an access line would be written now: the logger's level lets `info` through (it can change on reload). */
export function writesAccessLines(logger: Logger): boolean {
  return logger.levelVal <= INFO
}

/**
 * The line every request ends with: what `logger.info(fields, 'request')` writes (level, time,
 * the logger's bindings, the fields, msg), which a test holds it to byte for byte. For a logger
 * the gateway made itself (observability/logger.ts), whose format it therefore knows, the line is
 * built here with fixed keys and handed to the logger's destination: pino's generic walk over an
 * object (serializers, stringifiers, a key check per member) cost about 3 µs a line, a third of
 * what the native row's log costs (docs/performance.md). Any other logger (an embedder's, a
 * child) gets `logger.info`. No field holds a header other than the user agent or a query, so
 * the gateway's redaction has nothing to do on it (SPEC 9).
 */
export function createAccessLog(logger: Logger): AccessLog {
  const format = ownLineFormat(logger)
  if (format === undefined) return (fields) => logger.info(fields, 'request')
  const { destination, bindings } = format
  return function writeAccessLine(fields) {
    // The level can change on reload; this reads it per line as pino does.
    if (logger.levelVal > INFO) return
    let line = `{"level":${INFO},"time":${Date.now()}${bindings},"requestId":${quote(fields.requestId)}`
    if (fields.traceId !== undefined) line += `,"traceId":${quote(fields.traceId)}`
    if (fields.spanId !== undefined) line += `,"spanId":${quote(fields.spanId)}`
    if (fields.method !== undefined) line += `,"method":${quote(fields.method)}`
    if (fields.path !== undefined) line += `,"path":${quote(fields.path)}`
    if (fields.tenant !== undefined) line += `,"tenant":${quote(fields.tenant)}`
    if (fields.requestedTenant !== undefined) line += `,"requestedTenant":${quote(fields.requestedTenant)}`
    if (fields.class !== undefined) line += `,"class":${quote(fields.class)}`
    if (fields.route !== undefined) line += `,"route":${quote(fields.route)}`
    if (fields.v4Path !== undefined) line += `,"v4Path":${quote(fields.v4Path)}`
    if (fields.clientId !== undefined) line += `,"clientId":${quote(fields.clientId)}`
    if (fields.stage !== undefined) line += `,"stage":${quote(fields.stage)}`
    if (fields.servedBy !== undefined) line += `,"servedBy":${quote(fields.servedBy)}`
    if (fields.deprecation !== undefined) line += `,"deprecation":${quote(fields.deprecation)}`
    line += `,"status":${finite(fields.status)},"durationMs":${milliseconds(fields.durationMs)}`
    if (fields.upstreamMs !== undefined) line += `,"upstreamMs":${milliseconds(fields.upstreamMs)}`
    if (fields.bytesOut !== undefined) line += `,"bytesOut":${finite(fields.bytesOut)}`
    if (fields.session !== undefined) line += `,"session":${quote(fields.session)}`
    if (fields.idempotency !== undefined) line += `,"idempotency":${quote(fields.idempotency)}`
    if (fields.error !== undefined) line += `,"error":${quote(fields.error)}`
    if (fields.cause !== undefined) line += `,"cause":${quote(fields.cause)}`
    if (fields.clientAddress !== undefined) line += `,"clientAddress":${quote(fields.clientAddress)}`
    if (fields.userAgent !== undefined) line += `,"userAgent":${quote(fields.userAgent)}`
    destination.write(`${line},"msg":"request"}\n`)
  }
}

/**
 * What `JSON.stringify` makes of a string, without its call for the common case: the fields are
 * mostly ASCII with nothing to escape (request ids are [A-Za-z0-9._:-] or a UUID; tenants, classes,
 * route labels, paths, outcomes and codes rarely hold anything else). Anything outside printable
 * ASCII, a quote or a backslash goes to `JSON.stringify`, as pino sends it.
 */
function quote(value: string): string {
  return PLAIN_ASCII.test(value) ? `"${value}"` : JSON.stringify(value)
}

const PLAIN_ASCII = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

/** pino writes a number that is not finite as null. */
function finite(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null'
}

/** Below this many milliseconds (11.5 days) a duration's microseconds are a safe integer many times over. */
const FORMATTED_MS_LIMIT = 1e9

/**
 * A duration in milliseconds with at most three decimals (roundMs), written as `JSON.stringify`
 * writes it, from its integer microseconds: printing the shortest form of a fraction was about
 * 250 ns a number against 50 here, and a line has two (a contract test holds the two to the
 * same text). Anything else (more decimals, negative, huge, not finite) goes the general way.
 */
export function milliseconds(value: number): string {
  const micros = Math.round(value * 1000)
  if (!(value >= 0 && value < FORMATTED_MS_LIMIT) || Math.abs(value * 1000 - micros) > 1e-6) return finite(value)
  const whole = Math.trunc(micros / 1000)
  const fraction = micros - whole * 1000
  if (fraction === 0) return `${whole}`
  // Three digits, then without trailing zeros: 50 µs is .05, 500 µs is .5.
  const digits = fraction < 10 ? `00${fraction}` : fraction < 100 ? `0${fraction}` : `${fraction}`
  return `${whole}.${fraction % 100 === 0 ? digits.slice(0, 1) : fraction % 10 === 0 ? digits.slice(0, 2) : digits}`
}
