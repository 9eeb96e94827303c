import type { Logger } from 'pino'

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

/**
 * The line every request ends with: `logger.info(fields, 'request')`, in the logger's own format
 * and to its own destination (level, time, the logger's bindings, the fields, msg). Its fields
 * never hold a header or a query (the trace id is 32 hex digits checked out of `traceparent`),
 * so the gateway's redaction has nothing to do on it (SPEC 9).
 */
export function createAccessLog(logger: Logger): AccessLog {
  return function writeAccessLine(fields) {
    logger.info(fields, 'request')
  }
}
