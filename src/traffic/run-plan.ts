import type { Exchange } from '../kernel/exchange.js'
import { continueIfExpected, requestBody } from '../kernel/request-body.js'
import { readBody } from '../legacy/read-body.js'
import { runLegacyCalls, type LegacyCallDeps, type LegacyCallResult } from '../legacy/run-legacy-call.js'
import { shapeLegacyResponse } from '../legacy/shape-response.js'
import type { AccessRecord } from '../observability/access-record.js'
import type { Forward } from '../passthrough/forward-stream.js'
import type { CallsPlan, Plan, PlanFacts, ReadBodyPlan } from '../plan/plan-request.js'
import { putOwnHeaders } from '../util/own-headers.js'
import { roundMs } from '../util/round-ms.js'

export interface RunDeps extends LegacyCallDeps {
  forwardStream: Forward
  /** The gateway's own error answer (the kernel's). */
  answerError: (exchange: Exchange, error: unknown) => void
  isDraining: () => boolean
}

/**
 * Runs a plan on the live request: one case per kind of plan (plan-request.ts). What the plan
 * decided goes on the access record first, so a request refused or cut midway is logged with it.
 */
export function runPlan(plan: Plan, exchange: Exchange, deps: RunDeps): void {
  recordFacts(exchange.record, plan.facts)
  Object.assign(exchange.answerHeaders, plan.answerHeaders)
  switch (plan.kind) {
    case 'refuse':
      deps.answerError(exchange, plan.error)
      return
    case 'stream':
      deps.forwardStream(exchange, plan.call)
      return
    case 'read-body':
      readAndRunLegacyCall(exchange, plan, deps).catch((error: unknown) => deps.answerError(exchange, error))
      return
    case 'calls':
      runCalls(exchange, plan, deps).catch((error: unknown) => deps.answerError(exchange, error))
      return
  }
}

export function recordFacts(record: AccessRecord, facts: Readonly<PlanFacts>): void {
  record.tenant = facts.tenant
  record.requestedTenant = facts.requestedTenant
  record.trafficClass = facts.trafficClass
  record.legacyRoute = facts.legacyRoute
  record.v4Path = facts.v4Path
  record.clientFingerprint = facts.clientFingerprint
  record.clientId = facts.clientId
  record.deprecationAction = facts.deprecation?.action
}

/** A legacy runtime request: its body, read with its own limit (SPEC 10), completes the plan. */
async function readAndRunLegacyCall(exchange: Exchange, plan: ReadBodyPlan, deps: RunDeps): Promise<void> {
  const { request, response } = exchange
  const bytes = await readBody(requestBody(request), request.headers['content-length'], plan.limitBytes, () => continueIfExpected(request, response))
  const planned = plan.withBody(bytes)
  if (planned.kind === 'refuse') throw planned.error
  await runCalls(exchange, planned, deps)
}

async function runCalls(exchange: Exchange, plan: CallsPlan, deps: RunDeps): Promise<void> {
  // The calls report their path, time and session outcome on the record as they go (SPEC 9).
  const result = await runLegacyCalls(plan.calls, { origin: plan.origin, timeoutMs: plan.timeoutMs, cancelScope: exchange, trace: exchange.record }, deps)
  writeLegacyAnswer(exchange, plan, result, deps.isDraining())
}

/** The V4 answer as the legacy client gets it (SPEC 6), with the request's own headers on top. */
export function writeLegacyAnswer(exchange: Exchange, plan: CallsPlan, result: LegacyCallResult, draining: boolean): void {
  const response = exchange.response
  const shaped = shapeLegacyResponse(result.response.statusCode, result.response.headers, result.response.body, {
    requestId: exchange.id,
    totalMs: roundMs(performance.now() - exchange.head.startedAt),
    sessionId: result.sessionId,
    responseFields: plan.responseFields
  })
  // x-request-id and the route's deprecation headers (the plan's answerHeaders); in a session, the
  // successor-version names it (SPEC 13).
  const sessionLink = result.sessionId === undefined ? undefined : plan.sessionLink?.(result.sessionId)
  const headers = putOwnHeaders(shaped.headers, sessionLink === undefined ? exchange.answerHeaders : { ...exchange.answerHeaders, link: sessionLink })
  if (result.sessionId !== undefined) headers['x-v4-session-id'] = result.sessionId
  // RFC 9110 8.6 / 6.4.1: 1xx, 204 and 304 answers have no content and no Content-Length.
  const bodiless = shaped.statusCode < 200 || shaped.statusCode === 204 || shaped.statusCode === 304
  const bytes = bodiless ? 0 : typeof shaped.payload === 'string' ? Buffer.byteLength(shaped.payload) : shaped.payload.length
  if (!bodiless) headers['content-length'] = bytes
  if (draining) headers.connection = 'close'
  if (response.destroyed) return
  response.writeHead(shaped.statusCode, headers)
  response.end(bodiless ? undefined : shaped.payload)
  exchange.record.bytesOut += bytes
}
