import type { OutgoingHttpHeaders } from 'node:http'
import { deliver } from '../kernel/delivery-watch.js'
import type { Exchange } from '../kernel/exchange.js'
import type { LegacyCallResult } from '../legacy/run-legacy-call.js'
import { shapeLegacyResponse } from '../legacy/shape-response.js'
import type { CallsPlan } from '../plan/plan-request.js'
import { putOwnHeaders } from '../util/own-headers.js'
import { roundMs } from '../util/round-ms.js'

/** The V4 answer as the legacy client gets it (SPEC 6), with the request's own headers on top. */
export function writeLegacyAnswer(exchange: Exchange, plan: CallsPlan, result: LegacyCallResult, draining: boolean): void {
  writeAnswer(exchange, legacyAnswer(exchange, plan, result), draining, plan.timeoutMs)
}

/**
 * SPEC 4 step 6 and 13 for the gateway's own answer after an execution went out (a 504, a 502):
 * it names the session in `x-v4-session-id`, and its successor link is the session's, as V4's
 * answer would have (`legacyAnswer`). Written into the request's own headers, which every answer
 * carries; a stale answer's session gone, they go back to what they were.
 */
export function sessionOnAnswers(exchange: Exchange, plan: CallsPlan): (sessionId: string | undefined) => void {
  const headers = exchange.answerHeaders
  const planned = headers.link
  return (sessionId) => {
    if (sessionId === undefined) {
      delete headers['x-v4-session-id']
      if (planned === undefined) delete headers.link
      else headers.link = planned
      return
    }
    headers['x-v4-session-id'] = sessionId
    const link = plan.sessionLink?.(sessionId)
    if (link !== undefined) headers.link = link
  }
}

/** The session the request's answers name (`sessionOnAnswers`), if an execution went out to one. */
export function sessionNamed(exchange: Exchange): string | undefined {
  const named = exchange.answerHeaders['x-v4-session-id']
  return typeof named === 'string' ? named : undefined
}

/** What `writeLegacyAnswer` sends: status, headers and body bytes (a 1xx, 204 or 304 has none). */
export interface LegacyAnswer {
  statusCode: number
  headers: OutgoingHttpHeaders
  payload: Buffer | string | undefined
}

export function legacyAnswer(exchange: Exchange, plan: CallsPlan, result: LegacyCallResult): LegacyAnswer {
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
  if (!bodiless) headers['content-length'] = typeof shaped.payload === 'string' ? Buffer.byteLength(shaped.payload) : shaped.payload.length
  return { statusCode: shaped.statusCode, headers, payload: bodiless ? undefined : shaped.payload }
}

/** `stallMs`: how long the client may take none of the answer before it is cut (SPEC 10; the upstream's limit). */
export function writeAnswer(exchange: Exchange, answer: LegacyAnswer, draining: boolean, stallMs: number): void {
  const response = exchange.response
  if (draining) answer.headers.connection = 'close'
  if (response.destroyed) return
  response.writeHead(answer.statusCode, answer.headers)
  deliver(exchange, answer.payload, answer.payload === undefined ? 0 : (answer.headers['content-length'] as number), stallMs)
}
