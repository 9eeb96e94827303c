import type { Logger } from 'pino'
import { buildErrorBody, ERROR_CONTENT_TYPE } from '../errors/error-body.js'
import { toGatewayError, type GatewayError } from '../errors/registry.js'
import type { AccessRecord } from '../observability/access-record.js'
import { logGatewayError, type RequestLogIds } from '../observability/log-gateway-error.js'
import { traceIdOf } from '../observability/trace-context.js'
import { upstreamFailureCause } from '../upstream/map-upstream-error.js'
import { roundMs } from '../util/round-ms.js'
import { cutAnswer, lingerUntilBodyEnds, markClosing } from './connection-close.js'
import type { Exchange } from './exchange.js'

/**
 * The traffic listener's errors, in the SPEC 6 envelope, with the headers the gateway had set for
 * the request (deprecation, `Retry-After`, …). Recorded for the access log. It never throws: it
 * is the last answer a request can get. A response already under way can only be cut.
 */
export function writeGatewayError(exchange: Exchange, error: unknown, log: Pick<Logger, 'debug' | 'info' | 'error'>): void {
  const gatewayError = toGatewayError(error)
  // A client that left ends its request (499): the upstream call its leaving cancelled failed for
  // that reason, not the upstream's, so it is no upstream failure and no error of the request (SPEC 17).
  // A keyed request's calls are not cancelled by it (SPEC 16): what they fail with is theirs.
  const failureIsTheRequests = !exchange.clientGone || exchange.outlivesClient !== undefined
  if (failureIsTheRequests) {
    exchange.record.errorCode = gatewayError.code
    // The tenant's V4 upstream, or SPEC 14's legacy one when the plan chose that side.
    noteUpstreamFailure(exchange.record, gatewayError, exchange.record.servedBy === 'legacy' ? 'legacy' : 'v4')
  }
  const ids = logIds(exchange)
  logGatewayError(log, gatewayError, !failureIsTheRequests, ids)
  const response = exchange.response
  // A socket already destroyed (a cut connection) takes no answer; its response reports its end a turn later.
  if (response.headersSent || response.destroyed || response.socket?.destroyed === true) {
    // An answer under way is cut so that its client can tell (connection-close.ts).
    cutAnswer(response, exchange.connection)
    return
  }
  markMadeByGateway(exchange)
  const body = JSON.stringify(buildErrorBody(gatewayError, exchange.id, roundMs(performance.now() - exchange.head.startedAt)))
  const bytes = Buffer.byteLength(body)
  const envelope = { 'x-request-id': exchange.id, 'content-type': ERROR_CONTENT_TYPE, 'content-length': bytes }
  // The rest of an oversized body is not read: the connection cannot carry another request.
  const close = gatewayError.code === 'PAYLOAD_TOO_LARGE' || exchange.answerHeaders.connection === 'close' ? { connection: 'close' } : undefined
  try {
    response.writeHead(gatewayError.statusCode, { ...exchange.answerHeaders, ...close, ...envelope })
  } catch (headerError) {
    // A header the gateway set could not be written: the envelope alone still answers.
    log.error({ ...ids, err: headerError }, 'gateway error headers could not be written')
    try {
      response.writeHead(gatewayError.statusCode, { ...close, ...envelope })
    } catch {
      response.destroy()
      return
    }
  }
  // The connection's last answer: the gateway's own close, one the client asked to close after,
  // or one to an `Expect: 100-continue` request refused before its 100 (Node's writeHead turns
  // keep-alive off then: the client may be sending its body all the same). Nothing after it is
  // served on its connection, and the rest of its body is read before the close, so that the
  // answer is not lost to a reset (connection-close.ts).
  if (close !== undefined || !response.shouldKeepAlive) {
    markClosing(exchange.connection)
    lingerUntilBodyEnds(exchange.request, exchange.connection)
  }
  response.end(body)
  // An answer to HEAD has no body: Node sends none (RFC 9110 9.3.2).
  if (exchange.head.method !== 'HEAD') exchange.record.bytesOut += bytes
}

/** The ids the request's access line will carry (traffic-handler.ts), so that its other lines join it and its trace. */
function logIds(exchange: Exchange): RequestLogIds {
  const span = exchange.span
  if (span !== undefined) return { requestId: exchange.id, traceId: span.traceId, spanId: span.spanId }
  const traceId = traceIdOf(exchange.head.headers.traceparent)
  return traceId === undefined ? { requestId: exchange.id } : { requestId: exchange.id, traceId }
}

/** SPEC 17: an upstream failure the request's answer reports, for its access line's `cause` and the failures metric. */
export function noteUpstreamFailure(record: AccessRecord, error: GatewayError, upstream: 'v4' | 'legacy'): void {
  const cause = upstreamFailureCause(error)
  if (cause !== undefined) record.upstreamFailure = { upstream, cause }
}

/** SPEC 14: an answer the gateway made itself says so (`x-v4gw-served-by: gateway`), whichever side the plan had chosen. */
export function markMadeByGateway(exchange: Exchange): void {
  if (exchange.record.servedBy === undefined) return
  exchange.record.servedBy = 'gateway'
  exchange.answerHeaders['x-v4gw-served-by'] = 'gateway'
}
