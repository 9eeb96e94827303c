import { pino, type Logger } from 'pino'

/** One access-log line's fields (SPEC 9); an undefined field is left out, as pino leaves it out. */
export interface AccessLogFields {
  requestId: string
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

/**
 * The line every request ends with, in the logger's own format and to its own destination:
 * exactly what `logger.info(fields, 'request')` writes (level, time, the logger's bindings, the
 * fields, msg), which a test holds it to. It is built here with fixed keys because it is the one
 * line per request, and pino's generic walk over an object (serializers, stringifiers, a key
 * check per member) cost about twice as much (docs/performance.md). Its fields never hold a
 * header or a query, so the logger's redaction has nothing to do on it (SPEC 9).
 */
export function createAccessLog(logger: Logger): AccessLog {
  const stream = (logger as unknown as Record<symbol, { write(line: string): unknown }>)[pino.symbols.streamSym]
  const time = (logger as unknown as Record<symbol, () => string>)[pino.symbols.timeSym]
  const bindings = (logger as unknown as Record<symbol, string>)[pino.symbols.chindingsSym]
  // pino.symbols is pino's public way in; should a pino release move these, fail at start, not per line.
  if (stream === undefined || typeof time !== 'function' || typeof bindings !== 'string') {
    throw new Error('the access log needs a pino logger with a destination stream')
  }
  return function writeAccessLine(fields) {
    // The level can change on reload; this reads it per line as pino does.
    if (logger.levelVal > INFO) return
    let line = `{"level":${INFO}${time()}${bindings},"requestId":${JSON.stringify(fields.requestId)}`
    if (fields.tenant !== undefined) line += `,"tenant":${JSON.stringify(fields.tenant)}`
    if (fields.class !== undefined) line += `,"class":${JSON.stringify(fields.class)}`
    if (fields.route !== undefined) line += `,"route":${JSON.stringify(fields.route)}`
    if (fields.v4Path !== undefined) line += `,"v4Path":${JSON.stringify(fields.v4Path)}`
    line += `,"status":${finite(fields.status)},"durationMs":${finite(fields.durationMs)}`
    if (fields.upstreamMs !== undefined) line += `,"upstreamMs":${finite(fields.upstreamMs)}`
    if (fields.session !== undefined) line += `,"session":${JSON.stringify(fields.session)}`
    if (fields.error !== undefined) line += `,"error":${JSON.stringify(fields.error)}`
    stream.write(`${line},"msg":"request"}\n`)
  }
}

/** pino writes a number that is not finite as null. */
function finite(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null'
}
