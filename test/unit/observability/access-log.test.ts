import { pino, type LoggerOptions } from 'pino'
import { describe, expect, it, vi } from 'vitest'
import { createAccessLog, milliseconds, type AccessLogFields } from '../../../src/observability/access-log.js'
import { roundMs } from '../../../src/util/round-ms.js'
import { createLogger } from '../../../src/observability/logger.js'

function capture(level = 'info') {
  const lines: string[] = []
  const logger = createLogger({ level, destination: { write: (line: string) => lines.push(line) } })
  return { logger, lines }
}

const FULL: AccessLogFields = {
  requestId: 'req-1',
  traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
  spanId: '00f067aa0ba902b7',
  method: 'POST',
  path: '/v1/runs/r-1/invoke',
  tenant: 'acme',
  requestedTenant: undefined,
  class: 'legacy',
  route: 'POST /v1/runs/:runId/invoke',
  v4Path: '/v4/sessions/ses_1/executions.execute',
  clientId: 'hdr:billing-batch.7',
  stage: 'canary',
  servedBy: 'v4',
  deprecation: 'header',
  status: 200,
  durationMs: 1.234,
  upstreamMs: 0.5,
  bytesOut: 1234,
  session: 'hit',
  idempotency: 'replayed',
  error: undefined,
  cause: undefined,
  clientAddress: '::ffff:127.0.0.1',
  userAgent: 'legacy-sdk/1.4 (linux)'
}

const CASES: AccessLogFields[] = [
  FULL,
  // What an unknown route leaves unset.
  { requestId: 'r', tenant: undefined, class: undefined, route: undefined, v4Path: undefined, status: 404, durationMs: 0, upstreamMs: undefined, session: undefined, error: 'NOT_FOUND' },
  // A tenant that is not configured: the line names the one asked for.
  { ...FULL, tenant: undefined, requestedTenant: 'gh\u00f6st"', class: undefined, route: undefined, v4Path: undefined, status: 404, bytesOut: 0, error: 'TENANT_UNKNOWN' },
  // A native path is the client's: quotes, backslashes, control and non-ASCII characters must be escaped as pino escapes them.
  { ...FULL, class: 'native', route: undefined, v4Path: '/v4/a"b\\c\u0001d\u00e9\u00ff%22', session: undefined, status: 499, error: 'UPSTREAM_TIMEOUT' },
  // An upstream failure: the error code and its cause.
  { ...FULL, status: 502, error: 'UPSTREAM_UNAVAILABLE', cause: 'refused' },
  // pino writes a number that is not finite as null.
  { ...FULL, durationMs: Number.NaN, upstreamMs: Number.POSITIVE_INFINITY },
  // Tracing off: the incoming traceparent's trace id, no span.
  { ...FULL, spanId: undefined }
]

/** The two lines with their clocks read at different moments made equal. */
function sameTime(line: string): string {
  return line.replace(/"time":\d+/, '"time":0')
}

describe('access log', () => {
  it.each(CASES.map((fields, index) => [index, fields] as const))('case %i: writes byte for byte what logger.info(fields, "request") writes', (_index, fields) => {
    const { logger, lines } = capture()
    createAccessLog(logger)(fields)
    logger.info(fields, 'request')
    expect(lines).toHaveLength(2)
    expect(sameTime(lines[0] as string)).toBe(sameTime(lines[1] as string))
    expect(JSON.parse(lines[0] as string)).toMatchObject({ level: 30, service: 'v4gw', msg: 'request', requestId: fields.requestId })
  })

  // Printable ASCII goes straight between quotes; each of the others must not.
  const ALPHABET = ['a', '/', ' ', '~', '"', '\\', '\u0000', '\u001f', '\u007f', '\u0080', '\u00e9', '\u2028', '\ud83d\ude00', '']
  function generatedFields(alphabet: string[], count: number): AccessLogFields[] {
    return Array.from({ length: count }, (_, index) => {
      const pick = (salt: number) => Array.from({ length: (index + salt) % 5 }, (_, at) => alphabet[(index * 7 + at * 3 + salt) % alphabet.length]).join('')
      return { ...FULL, requestId: pick(0), path: pick(6), tenant: pick(1), route: pick(2), v4Path: pick(3), session: pick(4), error: pick(5), userAgent: pick(7), clientId: pick(8), idempotency: pick(9), traceId: pick(10), spanId: pick(11), stage: pick(12), servedBy: pick(13), deprecation: pick(14) }
    })
  }

  it('quotes every field as pino does, whatever characters it holds', () => {
    const { logger, lines } = capture()
    const accessLog = createAccessLog(logger)
    for (const fields of generatedFields(ALPHABET, 400)) {
      accessLog(fields)
      logger.info(fields, 'request')
    }
    for (let index = 0; index < lines.length; index += 2) expect(sameTime(lines[index] as string)).toBe(sameTime(lines[index + 1] as string))
  })

  it('writes the line itself for a logger the gateway made, without logger.info (the cases above compare the two)', () => {
    const { logger, lines } = capture()
    const info = vi.spyOn(logger, 'info')
    createAccessLog(logger)(FULL)
    expect(info).not.toHaveBeenCalled()
    expect(lines).toHaveLength(1)
  })

  it('carries a child logger’s bindings, as pino does', () => {
    const { logger, lines } = capture()
    const child = logger.child({ listener: 'traffic' })
    createAccessLog(child)(FULL)
    child.info(FULL, 'request')
    expect(sameTime(lines[0] as string)).toBe(sameTime(lines[1] as string))
    expect(JSON.parse(lines[0] as string).listener).toBe('traffic')
  })

  // An embedder may pass buildGateway a logger of its own: each of these writes differently from pino's defaults.
  const OWN_FORMATS: [string, LoggerOptions][] = [
    ['a level formatter', { formatters: { level: (label) => ({ level: label }) } }],
    ['a log formatter', { formatters: { log: (object) => ({ ...object, extra: true }) } }],
    ['another message key', { messageKey: 'message' }],
    ['a mixin', { mixin: () => ({ pod: 'p-1' }) }],
    ['a nested key', { nestedKey: 'payload' }],
    ['a message prefix', { msgPrefix: '[gw] ' }],
    ['CRLF line ends', { crlf: true }],
    ['a serializer on one of the fields', { serializers: { route: (route: string) => route.toUpperCase() } }],
    ['redaction of one of the fields', { redact: ['v4Path'] }],
    ['a stream hook', { hooks: { streamWrite: (line) => line.replace('request', 'REQUEST') } }]
  ]

  it.each(OWN_FORMATS)('lets pino write the line for a logger with %s', (_name, options) => {
    const lines: string[] = []
    const logger = pino({ level: 'info', timestamp: pino.stdTimeFunctions.epochTime, ...options }, { write: (line: string) => lines.push(line) })
    const info = vi.spyOn(logger, 'info')
    createAccessLog(logger)(FULL)
    expect(info).toHaveBeenCalledTimes(1)
    info.mockRestore()
    logger.info(FULL, 'request')
    expect(sameTime(lines[0] as string)).toBe(sameTime(lines[1] as string))
  })

  it('routes the line by its own level on a multistream: an error-only stream does not get it', () => {
    const infoLines: string[] = []
    const errorLines: string[] = []
    const logger = pino(
      { level: 'info' },
      pino.multistream([
        { level: 'info', stream: { write: (line: string) => infoLines.push(line) } },
        { level: 'error', stream: { write: (line: string) => errorLines.push(line) } }
      ])
    )
    const write = createAccessLog(logger)
    logger.error('before')
    write(FULL)
    expect(errorLines).toHaveLength(1)
    expect(infoLines).toHaveLength(2)
    expect(JSON.parse(infoLines[1] as string).msg).toBe('request')
  })

  it('follows the logger’s level, including a level changed after it was made (a reload)', () => {
    const { logger, lines } = capture('warn')
    const write = createAccessLog(logger)
    write(FULL)
    expect(lines).toHaveLength(0)
    logger.level = 'info'
    write(FULL)
    expect(lines).toHaveLength(1)
    logger.level = 'silent'
    write(FULL)
    expect(lines).toHaveLength(1)
  })
})

describe('milliseconds (the durations of an access line)', () => {
  // Contract: the text JSON.stringify (pino's way) gives the same number.
  it('writes a duration rounded to microseconds exactly as JSON.stringify does', () => {
    const values = [0, -0, 0.001, 0.01, 0.05, 0.1, 0.5, 1, 1.2, 10.01, 12.345, 99.999, 100, 999.999, 1000, 1000.001, 65_535.5, 123_456.789, 999_999_999.999]
    let seed = 7
    for (let i = 0; i < 20_000; i++) {
      seed = (seed * 48_271) % 2_147_483_647
      // Spread over µs to hours, as a request's durations are.
      values.push(roundMs((seed / 2_147_483_647) * 10 ** ((i % 8) - 1)))
    }
    for (const value of values) expect(milliseconds(value), String(value)).toBe(JSON.stringify(value))
  })

  it('writes anything else the general way: more decimals, negative, huge, not finite', () => {
    for (const value of [0.0005, 1.23456, -1.5, -0.001, 1e9, 2.5e15, 1e21]) expect(milliseconds(value)).toBe(JSON.stringify(value))
    expect(milliseconds(Number.NaN)).toBe('null')
    expect(milliseconds(Number.POSITIVE_INFINITY)).toBe('null')
  })
})
