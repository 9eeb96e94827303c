import type { Exchange } from '../kernel/exchange.js'
import { continueIfExpected, requestBody } from '../kernel/request-body.js'
import { readBody } from '../legacy/read-body.js'
import { runLegacyCalls, type LegacyCallDeps } from '../legacy/run-legacy-call.js'
import type { AccessRecord, ServedBy } from '../observability/access-record.js'
import type { Forward, StreamTap } from '../passthrough/forward-stream.js'
import type { CallsPlan, IdempotentPlan, Plan, PlanFacts, ReadBodyPlan, StreamPlan } from '../plan/plan-request.js'
import { sessionOnAnswers, writeLegacyAnswer } from './legacy-answer.js'
import { runIdempotent, type IdempotentRunDeps } from './run-idempotent.js'

export interface RunDeps extends LegacyCallDeps, IdempotentRunDeps {
  forwardStream: Forward
  /** The gateway's own error answer (the kernel's). */
  answerError: (exchange: Exchange, error: unknown) => void
  isDraining: () => boolean
  /** SPEC 15: stage shadow's comparison of a request the legacy upstream serves; the tap that copies it, when it is compared. */
  shadow?: (exchange: Exchange, plan: StreamPlan) => StreamTap | undefined
}

/**
 * Runs a plan on the live request: one case per kind of plan (plan-request.ts). What the plan
 * decided goes on the access record first, so a request refused or cut midway is logged with it.
 */
export function runPlan(plan: Plan, exchange: Exchange, deps: RunDeps): void {
  recordFacts(exchange.record, plan.facts)
  Object.assign(exchange.answerHeaders, plan.answerHeaders)
  // SPEC 14's side, as the header says it (the gateway's error writer makes it `gateway`).
  exchange.record.servedBy = plan.answerHeaders['x-v4gw-served-by'] as ServedBy | undefined
  switch (plan.kind) {
    case 'refuse':
      deps.answerError(exchange, plan.error)
      return
    case 'stream':
      // SPEC 15: in stage shadow the legacy call is tapped; the comparison starts once its answer is sent.
      deps.forwardStream(exchange, plan.call, plan.shadow === true ? deps.shadow?.(exchange, plan) : undefined)
      return
    case 'read-body':
      readAndRunLegacyCall(exchange, plan, deps).catch((error: unknown) => deps.answerError(exchange, error))
      return
    case 'calls':
      runCalls(exchange, plan, deps).catch((error: unknown) => deps.answerError(exchange, error))
      return
    case 'idempotent':
      void runKeyed(exchange, plan, deps)
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
  record.clientExempt = facts.clientExempt
  record.deprecationAction = facts.deprecation?.action
  record.credentialType = facts.credential
  record.stage = facts.migration?.stage
}

/** A legacy runtime request: its body, read with its own limit (SPEC 10), completes the plan. */
async function readAndRunLegacyCall(exchange: Exchange, plan: ReadBodyPlan, deps: RunDeps): Promise<void> {
  const { request, response } = exchange
  const bytes = await readBody(requestBody(request), request.headers['content-length'], plan.limitBytes, () => continueIfExpected(request, response))
  const planned = plan.withBody(bytes)
  if (planned.kind === 'refuse') throw planned.error
  if (planned.kind === 'idempotent') await runKeyed(exchange, planned, deps)
  else await runCalls(exchange, planned, deps)
}

/**
 * SPEC 16's run, which a client that leaves does not cut: the kernel keeps its in-flight slot,
 * and reports its end, once the run has ended, its error answered (so recorded) included. Never rejects.
 */
function runKeyed(exchange: Exchange, plan: IdempotentPlan, deps: RunDeps): Promise<void> {
  const running = runIdempotent(exchange, plan, deps).catch((error: unknown) => deps.answerError(exchange, error))
  exchange.outlivesClient = running
  return running
}

async function runCalls(exchange: Exchange, plan: CallsPlan, deps: RunDeps): Promise<void> {
  // The calls report their path, time and session outcome on the record as they go (SPEC 9).
  const sessionExecute = plan.calls.action === 'session-execute'
  const onSession = sessionExecute ? sessionOnAnswers(exchange, plan) : undefined
  const calls = runLegacyCalls(plan.calls, { origin: plan.origin, timeoutMs: plan.timeoutMs, cancelScope: exchange, trace: exchange.record, tracer: exchange.callTracer, onSession }, deps)
  // SPEC 10: a sessions.start is not cancelled with its client (SPEC 4 step 3): its slot waits for it.
  if (sessionExecute) exchange.callsUnderWay = calls
  const result = await calls
  writeLegacyAnswer(exchange, plan, result, deps.isDraining())
}
