import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'

/** The response envelope metadata of contract part 2. */
export interface Meta {
  requestId: string
  sessionId?: string
  executionId?: string
  lineageId?: string
  timingMs: { total: number }
}

export type MetaExtras = Pick<Meta, 'sessionId' | 'executionId' | 'lineageId'>

/** `ses_…`, `exe_…`, `lin_…`, `req_…`, `pol_…`: the prefix tells a reader what the id names. */
export function newId (prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll('-', '')}`
}

// Keyed by request object so that nothing outlives the request; fastify only measures time when
// its logger is on, so the simulator keeps its own start mark.
const requestStartMs = new WeakMap<object, number>()

export function markRequestStart (request: object): void {
  requestStartMs.set(request, performance.now())
}

function elapsedMs (request: object): number {
  const startedAt = requestStartMs.get(request)
  if (startedAt === undefined) return 0
  return Math.round((performance.now() - startedAt) * 1000) / 1000
}

export function buildMeta (request: { id: string }, extras: MetaExtras = {}): Meta {
  return {
    requestId: request.id,
    ...(extras.sessionId !== undefined && { sessionId: extras.sessionId }),
    ...(extras.executionId !== undefined && { executionId: extras.executionId }),
    ...(extras.lineageId !== undefined && { lineageId: extras.lineageId }),
    timingMs: { total: elapsedMs(request) }
  }
}
