import { describe, expect, it } from 'vitest'
import { createAccessLog, type AccessLogFields } from '../../../src/observability/access-log.js'
import { createLogger } from '../../../src/observability/logger.js'

function capture(level = 'info') {
  const lines: string[] = []
  const logger = createLogger({ level, destination: { write: (line: string) => lines.push(line) } })
  return { logger, lines }
}

const FULL: AccessLogFields = {
  requestId: 'req-1',
  tenant: 'acme',
  class: 'legacy',
  route: 'POST /v1/runs/:runId/invoke',
  v4Path: '/v4/sessions/ses_1/executions.execute',
  status: 200,
  durationMs: 1.234,
  upstreamMs: 0.5,
  session: 'hit',
  error: undefined
}

const CASES: AccessLogFields[] = [
  FULL,
  // What an unknown route leaves unset.
  { requestId: 'r', tenant: undefined, class: undefined, route: undefined, v4Path: undefined, status: 404, durationMs: 0, upstreamMs: undefined, session: undefined, error: 'NOT_FOUND' },
  // A native path is the client's: quotes, backslashes, control and non-ASCII characters must be escaped as pino escapes them.
  { ...FULL, class: 'native', route: undefined, v4Path: '/v4/a"b\\c\u0001d\u00e9\u00ff%22', session: undefined, status: 499, error: 'UPSTREAM_TIMEOUT' },
  // pino writes a number that is not finite as null.
  { ...FULL, durationMs: Number.NaN, upstreamMs: Number.POSITIVE_INFINITY }
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

  it('carries a child logger’s bindings, as pino does', () => {
    const { logger, lines } = capture()
    const child = logger.child({ listener: 'traffic' })
    createAccessLog(child)(FULL)
    child.info(FULL, 'request')
    expect(sameTime(lines[0] as string)).toBe(sameTime(lines[1] as string))
    expect(JSON.parse(lines[0] as string).listener).toBe('traffic')
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
