import { pino, type DestinationStream, type Logger } from 'pino'

/**
 * Every place a credential could reach a log line (SPEC 9). The access log never logs headers
 * or query strings; this list is the second line of defence, compiled once by pino.
 */
export const REDACTED_HEADERS = ['authorization', 'x-service-api-key', 'x-api-key', 'x-session-token', 'cookie', 'set-cookie', 'proxy-authorization'] as const

export const REDACT_PATHS: string[] = ['req.headers', 'res.headers', 'headers', 'request.headers', 'upstream.headers'].flatMap((base) =>
  REDACTED_HEADERS.map((name) => `${base}["${name}"]`)
)

export interface LoggerOptions {
  level: string
  /** Where the JSON lines go; stdout when omitted. Tests pass a sink to read the bytes. */
  destination?: DestinationStream
}

export function createLogger(options: LoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      base: { service: 'v4gw' },
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime
    },
    options.destination ?? pino.destination({ dest: 1, sync: false })
  )
}
