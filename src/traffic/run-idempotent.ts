import type { OutgoingHttpHeaders } from 'node:http'
import { buildErrorBody, ERROR_CONTENT_TYPE } from '../errors/error-body.js'
import { GatewayError, isGatewayError } from '../errors/registry.js'
import type { Exchange } from '../kernel/exchange.js'
import { markMadeByGateway, noteUpstreamFailure } from '../kernel/write-error.js'
import { runLegacyCalls, type LegacyCallDeps } from '../legacy/run-legacy-call.js'
import type { IdempotencyOutcome } from '../observability/access-record.js'
import type { CallsPlan, IdempotentPlan } from '../plan/plan-request.js'
import type { IdempotencyStore, RecordBounds, StoredAnswer } from '../sessions/idempotency-store.js'
import { roundMs } from '../util/round-ms.js'
import { legacyAnswer, sessionNamed, sessionOnAnswers, writeAnswer, type LegacyAnswer } from './legacy-answer.js'

/** The longest delay Node's timers take (2^31-1 ms). */
const MAX_TIMER_MS = 2_147_483_647

export interface IdempotentRunDeps extends LegacyCallDeps {
  /** SPEC 16's records: the replica's own memory, or the store its replicas share. */
  idempotency: IdempotencyStore
  /** The claims this process holds while their requests run, for the cut at shutdown (none: nothing to cut). */
  liveClaims?: LiveClaims
  isDraining: () => boolean
}

/** A claim this process holds while its request runs. */
export interface LiveClaim {
  readonly key: string
  readonly owner: string
  /** Execution calls sent so far that may have run (one answered with a stale session's status did not). */
  executions: number
  /** Set at the cut: the request's end no longer touches the record. */
  cut: boolean
  readonly stopRenewal: () => void
}

/**
 * The claims held by requests still running, so that the end of the grace period can settle
 * them (SPEC 16: "a claim whose request was cut at shutdown is deleted if no execution call was
 * sent and kept to its expiry otherwise").
 */
export interface LiveClaims {
  add(claim: LiveClaim): void
  delete(claim: LiveClaim): void
  /**
   * The grace period is over: each claim stops being renewed; one whose request sent no execution
   * is deleted (its retry runs at once), the others are left to expire (the execution may have
   * run; an answer the gateway never saw is not made up). Resolves once the deletes are done.
   */
  cut(store: IdempotencyStore): Promise<void>
  readonly size: number
}

export function createLiveClaims(): LiveClaims {
  const claims = new Set<LiveClaim>()
  return {
    add: (claim) => void claims.add(claim),
    delete: (claim) => void claims.delete(claim),
    async cut(store) {
      const releases: Array<Promise<void>> = []
      for (const claim of claims) {
        claim.cut = true
        claim.stopRenewal()
        if (claim.executions === 0) releases.push(Promise.resolve(store.release(claim.key, claim.owner)).catch(() => undefined))
      }
      claims.clear()
      await Promise.all(releases)
    },
    get size() {
      return claims.size
    }
  }
}

/** What a keyed request learnt of the store on its way: whether this replica's memory stood in for it. */
interface KeyedRun {
  /** SPEC 16 "Store down": the outcome is `store_unavailable` whatever else happened. */
  unavailable: boolean
}

/** SPEC 6's content type of the gateway's own answers, kept with a stored UPSTREAM_TIMEOUT. */

/**
 * SPEC 16 for one keyed request: the first claims the key, runs its calls and keeps the answer;
 * a retry with the same request gets that answer, with nothing sent upstream; one that arrives
 * while the first runs waits up to `waitMs` for it; the key with another request is a 422.
 */
export async function runIdempotent(exchange: Exchange, plan: IdempotentPlan, deps: IdempotentRunDeps): Promise<void> {
  const { recordKey, fingerprint, settings, leaseMs, boundsGroup } = plan.idempotency
  const store = deps.idempotency
  const bounds: RecordBounds = { group: boundsGroup, maxEntries: settings.maxEntries, maxBytes: settings.maxBytes }
  const waitUntil = performance.now() + settings.waitMs
  const run: KeyedRun = { unavailable: false }
  let waited = false
  for (;;) {
    // After a look that found this request running, a stalled look is not taken for an outage.
    const claim = await store.claim(recordKey, fingerprint, leaseMs, bounds, waited)
    if (claim.unavailable === true) run.unavailable = true
    if (claim.claimed) return executeOnce(exchange, plan, deps, claim.owner, bounds, run)
    const record = claim.record
    if (record.fingerprint !== fingerprint) {
      note(exchange, run, 'key_reused')
      throw new GatewayError('IDEMPOTENCY_KEY_REUSED', `this ${settings.keyHeader} was sent before with a different request; send a new key for a new request`)
    }
    if (record.state === 'done') {
      if (record.answer === null) {
        note(exchange, run, 'too_large')
        throw new GatewayError('IDEMPOTENCY_RESULT_TOO_LARGE', `the answer to this ${settings.keyHeader} was too large to keep; it is not executed again`)
      }
      note(exchange, run, waited ? 'waited' : 'replayed')
      writeAnswer(exchange, replayed(exchange, plan.calls, record.answer), deps.isDraining(), plan.calls.timeoutMs)
      return
    }
    // The client leaving ends the wait: its in-flight slot (SPEC 10) is not held for nobody, nor is
    // the key claimed again for it afterwards.
    if (!exchange.clientGone) {
      const remainingMs = waitUntil - performance.now()
      if (remainingMs <= 0) {
        note(exchange, run, 'in_progress')
        exchange.answerHeaders['retry-after'] = '1'
        throw new GatewayError('IDEMPOTENCY_IN_PROGRESS', `a request with this ${settings.keyHeader} is still being executed; retry later`)
      }
      // The first call ended (kept or not) or the wait is over: look again.
      waited = true
      await store.changed(recordKey, remainingMs, exchange)
      if (!exchange.clientGone) continue
    }
    // Nobody to answer. Its line says the first call was still running, with no error: no call of its own failed.
    note(exchange, run, 'in_progress')
    return
  }
}

/** The first call of a key: runs the calls under a renewed claim, then keeps the answer or lets the key go. */
async function executeOnce(exchange: Exchange, plan: IdempotentPlan, deps: IdempotentRunDeps, owner: string, bounds: RecordBounds, run: KeyedRun): Promise<void> {
  const { recordKey, settings, leaseMs } = plan.idempotency
  const store = deps.idempotency
  const calls = plan.calls
  // SPEC 16: the claim is renewed every third of its life while the request runs (a session-execute
  // can wait on a start lock and make several calls).
  // Node runs an interval past 2^31-1 ms every 1 ms: the largest limits make a lease whose third is.
  const renewal = setInterval(() => void Promise.resolve(store.renew(recordKey, owner, leaseMs)).catch(() => {}), Math.min(MAX_TIMER_MS, Math.max(1, Math.floor(leaseMs / 3))))
  renewal.unref()
  const live: LiveClaim = { key: recordKey, owner, executions: 0, cut: false, stopRenewal: () => clearInterval(renewal) }
  deps.liveClaims?.add(live)
  /** Lets the key go so that a retry runs, unless the shutdown's cut has settled the claim already. */
  const release = async (): Promise<void> => {
    if (!live.cut) await store.release(recordKey, owner)
  }
  try {
    let answer: LegacyAnswer
    let stored: StoredAnswer | null
    try {
      const result = await runLegacyCalls(
        calls.calls,
        {
          origin: calls.origin,
          timeoutMs: calls.timeoutMs,
          // Not the client's: a client that gives up must not cut an execution whose answer its retry will want.
          cancelScope: { cancelled: false, cancel: undefined },
          trace: exchange.record,
          tracer: exchange.callTracer,
          onExecution: () => live.executions++,
          // V4 did not know the session: that execution did not run, and what follows is judged on its own.
          onStaleExecution: () => live.executions--,
          onSession: calls.calls.action === 'session-execute' ? sessionOnAnswers(exchange, calls) : undefined
        },
        deps
      )
      answer = legacyAnswer(exchange, calls, result)
      // SPEC 16: an answer given where no execution call was sent (a refused sessions.start) is not kept.
      if (live.executions === 0) {
        await release()
        note(exchange, run, 'not_kept')
        writeAnswer(exchange, answer, deps.isDraining(), calls.timeoutMs)
        return
      }
      stored = storedAnswer(answer, result.sessionId, settings.maxBodyBytes)
    } catch (error) {
      // SPEC 16: no execution call went out that may have run (a failed sessions.start, a
      // connection that failed before the call was written, the pool the shutdown closed, the
      // new start or execution after a stale session's answer): not kept, so that a retry runs.
      if (!isGatewayError(error) || live.executions === 0) {
        await release()
        note(exchange, run, 'not_kept')
        throw error
      }
      // The execution may have run (a timeout, a connection cut after sending): the gateway's
      // answer is kept and sent as kept, so a retry gets it byte for byte.
      answer = gatewayErrorAnswer(exchange, error)
      stored = storedAnswer(answer, sessionNamed(exchange), settings.maxBodyBytes, true)
    }
    // After the cut the claim is left to its expiry (SPEC 16): the answer goes to the client only.
    if (!live.cut && (await store.complete(recordKey, owner, stored, settings.ttlMs, bounds)) === 'local') run.unavailable = true
    note(exchange, run, 'executed')
    writeAnswer(exchange, answer, deps.isDraining(), calls.timeoutMs)
  } finally {
    clearInterval(renewal)
    deps.liveClaims?.delete(live)
  }
}

function storedAnswer(answer: LegacyAnswer, sessionId: string | undefined, maxBodyBytes: number, madeByGateway = false): StoredAnswer | null {
  const body = answer.payload === undefined ? Buffer.alloc(0) : typeof answer.payload === 'string' ? Buffer.from(answer.payload) : answer.payload
  if (body.length > maxBodyBytes) return null
  const contentType = answer.headers['content-type']
  const stored = { statusCode: answer.statusCode, body, contentType: contentType === undefined ? undefined : String(contentType), sessionId }
  return madeByGateway ? { ...stored, madeByGateway } : stored
}

/** The gateway's own error answer (SPEC 6 envelope), as the kernel writes it, made here so that the bytes kept are the bytes sent. */
function gatewayErrorAnswer(exchange: Exchange, error: GatewayError): LegacyAnswer {
  exchange.record.errorCode = error.code
  markMadeByGateway(exchange)
  noteUpstreamFailure(exchange.record, error, 'v4')
  const payload = Buffer.from(JSON.stringify(buildErrorBody(error, exchange.id, roundMs(performance.now() - exchange.head.startedAt))))
  const headers: OutgoingHttpHeaders = { ...exchange.answerHeaders, 'content-type': ERROR_CONTENT_TYPE, 'content-length': payload.length }
  return { statusCode: error.statusCode, headers, payload }
}

/**
 * A stored answer for a retry (SPEC 16): its status, body, `content-type` and `x-v4-session-id`,
 * with `idempotent-replayed: true`, this request's `x-request-id` and the deprecation headers of
 * the config it runs under (its plan's answer headers).
 */
function replayed(exchange: Exchange, plan: CallsPlan, answer: StoredAnswer): LegacyAnswer {
  // SPEC 14: an answer the gateway made is the gateway's when replayed too (access line, metrics, span).
  if (answer.madeByGateway === true) markMadeByGateway(exchange)
  const headers: OutgoingHttpHeaders = { ...exchange.answerHeaders }
  const sessionLink = answer.sessionId === undefined ? undefined : plan.sessionLink?.(answer.sessionId)
  if (sessionLink !== undefined) headers.link = sessionLink
  if (answer.contentType !== undefined) headers['content-type'] = answer.contentType
  if (answer.sessionId !== undefined) headers['x-v4-session-id'] = answer.sessionId
  headers['idempotent-replayed'] = 'true'
  // RFC 9110 8.6 / 6.4.1: 1xx, 204 and 304 answers have no content and no Content-Length.
  const bodiless = answer.statusCode < 200 || answer.statusCode === 204 || answer.statusCode === 304
  if (!bodiless) headers['content-length'] = answer.body.length
  return { statusCode: answer.statusCode, headers, payload: bodiless ? undefined : answer.body }
}

/**
 * The request's outcome (SPEC 16's word on the access line, the metric and the span). A request
 * that this replica's memory served because the shared store did not answer is
 * `store_unavailable`, whatever it came to: its guarantee held on this replica only.
 */
function note(exchange: Exchange, run: KeyedRun, outcome: IdempotencyOutcome): void {
  exchange.record.idempotencyOutcome = run.unavailable ? 'store_unavailable' : outcome
}
