import { pino } from 'pino'
import { describe, expect, it, vi } from 'vitest'
import { createAccessLog, type AccessLogFields } from '../../../src/observability/access-log.js'
import { createLogger } from '../../../src/observability/logger.js'

// SPEC 17: the access line carries `traceId` when the request had a valid traceparent, as
// pino writes it, in the order the traffic handler passes it.
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'

const WITH_TRACE: AccessLogFields = {
  requestId: 'req-1',
  traceId: TRACE_ID,
  tenant: 'acme',
  class: 'legacy',
  route: 'POST /v1/runs/invoke',
  v4Path: '/v4/sessions/ses_1/executions.execute',
  status: 200,
  durationMs: 1.5,
  upstreamMs: 0.5,
  session: 'miss',
  error: undefined
}

function sameTime(line: string): string {
  return line.replace(/"time":\d+/, '"time":0')
}

describe('access line with a trace id', () => {
  it.each([
    ['a full line', WITH_TRACE],
    ['a refusal', { requestId: 'r', traceId: TRACE_ID, tenant: undefined, class: undefined, route: undefined, v4Path: undefined, status: 400, durationMs: 0, upstreamMs: undefined, session: undefined, error: 'INVALID_REQUEST' }],
    ['no trace id (undefined)', { ...WITH_TRACE, traceId: undefined }]
  ] as const)('%s: writes byte for byte what logger.info(fields, "request") writes', (_name, fields) => {
    const lines: string[] = []
    const logger = createLogger({ level: 'info', destination: { write: (line: string) => lines.push(line) } })
    createAccessLog(logger)(fields)
    logger.info(fields, 'request')
    expect(lines).toHaveLength(2)
    expect(sameTime(lines[0] as string)).toBe(sameTime(lines[1] as string))
    expect(JSON.parse(lines[0] as string).traceId).toBe(fields.traceId)
  })

  it('lets pino write the line for a logger with a serializer on traceId', () => {
    const lines: string[] = []
    const logger = pino({ level: 'info', serializers: { traceId: (id: string) => id.toUpperCase() } }, { write: (line: string) => lines.push(line) })
    const info = vi.spyOn(logger, 'info')
    createAccessLog(logger)(WITH_TRACE)
    expect(info).toHaveBeenCalledTimes(1)
    expect(JSON.parse(lines[0] as string).traceId).toBe(TRACE_ID.toUpperCase())
  })
})
