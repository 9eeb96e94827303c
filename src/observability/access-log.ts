import { pino, type Logger } from 'pino'

/** One access-log line's fields (SPEC 9); an undefined field is left out, as pino leaves it out. */
export interface AccessLogFields {
  requestId: string
  /** The trace id of a valid incoming `traceparent` (SPEC 17). */
  traceId?: string | undefined
  tenant: string | undefined
  class: string | undefined
  route: string | undefined
  v4Path: string | undefined
  status: number
  durationMs: number
  upstreamMs: number | undefined
  session: string | undefined
  error: string | undefined
}

export type AccessLog = (fields: AccessLogFields) => void

const INFO = 30

/** The fields above: a logger with a serializer or redaction on any of them must write the line itself. */
const FIELD_NAMES: readonly (keyof AccessLogFields)[] = ['requestId', 'traceId', 'tenant', 'class', 'route', 'v4Path', 'status', 'durationMs', 'upstreamMs', 'session', 'error']

/**
 * The line every request ends with, in the logger's own format and to its own destination:
 * exactly what `logger.info(fields, 'request')` writes (level, time, the logger's bindings, the
 * fields, msg), which a test holds it to. It is built here with fixed keys because it is the one
 * line per request, and pino's generic walk over an object (serializers, stringifiers, a key
 * check per member) cost about twice as much (docs/performance.md). Its fields never hold a
 * header or a query (the trace id is 32 hex digits checked out of `traceparent`), so the
 * gateway's redaction has nothing to do on it (SPEC 9).
 *
 * A logger that writes differently from pino's defaults (its own level or log formatters,
 * message key, mixin, nested key, message prefix, line end, stream hook, a serializer or
 * redaction on one of these fields, or a multistream that routes by level) gets the line
 * through `logger.info` instead: an embedder's logger is written to as it asks. (One thing the
 * fast line skips: pino's `pino_asJson` diagnostics channel, which traces pino's own serialising.)
 */
export function createAccessLog(logger: Logger): AccessLog {
  const own = logger as unknown as Record<symbol, unknown>
  const stream = own[pino.symbols.streamSym] as { write(line: string): unknown } | undefined
  const time = own[pino.symbols.timeSym]
  const bindings = own[pino.symbols.chindingsSym]
  // pino.symbols is pino's public way in; should a pino release move these, fail at start, not per line.
  if (stream === undefined || typeof time !== 'function' || typeof bindings !== 'string') {
    throw new Error('the access log needs a pino logger with a destination stream')
  }
  if (!writesDefaultFormat(logger, stream)) return (fields) => logger.info(fields, 'request')
  const readTime = time as () => string
  return function writeAccessLine(fields) {
    // The level can change on reload; this reads it per line as pino does.
    if (logger.levelVal > INFO) return
    let line = `{"level":${INFO}${readTime()}${bindings},"requestId":${quote(fields.requestId)}`
    if (fields.traceId !== undefined) line += `,"traceId":${quote(fields.traceId)}`
    if (fields.tenant !== undefined) line += `,"tenant":${quote(fields.tenant)}`
    if (fields.class !== undefined) line += `,"class":${quote(fields.class)}`
    if (fields.route !== undefined) line += `,"route":${quote(fields.route)}`
    if (fields.v4Path !== undefined) line += `,"v4Path":${quote(fields.v4Path)}`
    line += `,"status":${finite(fields.status)},"durationMs":${finite(fields.durationMs)}`
    if (fields.upstreamMs !== undefined) line += `,"upstreamMs":${finite(fields.upstreamMs)}`
    if (fields.session !== undefined) line += `,"session":${quote(fields.session)}`
    if (fields.error !== undefined) line += `,"error":${quote(fields.error)}`
    stream.write(`${line},"msg":"request"}\n`)
  }
}

/** Whether pino would write an info line of these fields exactly as writeAccessLine does. */
function writesDefaultFormat(logger: Logger, stream: object): boolean {
  const own = logger as unknown as Record<symbol, unknown>
  const symbols = pino.symbols
  const levels = own[symbols.lsCacheSym] as Record<number, string> | undefined
  const formatters = own[symbols.formattersSym] as { log?: unknown } | undefined
  const hooks = own[symbols.hooksSym] as { streamWrite?: unknown } | undefined
  const stringifiers = (own[symbols.stringifiersSym] ?? {}) as Record<string | symbol, unknown>
  const serializers = (own[symbols.serializersSym] ?? {}) as Record<string, unknown>
  return (
    levels?.[INFO] === `{"level":${INFO}` &&
    own[symbols.messageKeySym] === 'msg' &&
    own[symbols.endSym] === '}\n' &&
    own[symbols.mixinSym] === undefined &&
    (own[symbols.nestedKeySym] ?? null) === null &&
    logger.msgPrefix === undefined &&
    formatters?.log === undefined &&
    hooks?.streamWrite === undefined &&
    // A multistream needs each line's level to route it, which pino hands over as it writes.
    (stream as Record<symbol, unknown>)[symbols.needsMetadataGsym] !== true &&
    stringifiers[symbols.wildcardFirstSym] === undefined &&
    FIELD_NAMES.every((name) => stringifiers[name] === undefined && serializers[name] === undefined)
  )
}

/**
 * What `JSON.stringify` makes of a string, without its call for the common case: the fields are
 * mostly ASCII with nothing to escape (request ids are [A-Za-z0-9._:-] or a UUID; tenants, classes,
 * route labels, V4 paths, outcomes and codes rarely hold anything else). Anything outside printable
 * ASCII, a quote or a backslash goes to `JSON.stringify`, so the bytes stay pino's, with one
 * difference kept from before: a lone surrogate is escaped, where pino writes it raw and UTF-8
 * then turns it into U+FFFD.
 */
function quote(value: string): string {
  return PLAIN_ASCII.test(value) ? `"${value}"` : JSON.stringify(value)
}

const PLAIN_ASCII = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/

/** pino writes a number that is not finite as null. */
function finite(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null'
}
