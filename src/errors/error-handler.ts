import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import { clientWentAway, type TrafficContext } from '../traffic/traffic-context.js'
import { buildErrorBody } from './error-body.js'
import { GatewayError, isGatewayError } from './registry.js'

/** Errors fastify itself raises before a handler runs (admin listener), in SPEC 6 terms. */
function fromFastifyError(error: FastifyError): GatewayError {
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new GatewayError('PAYLOAD_TOO_LARGE', 'request body is too large', { cause: error })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'unsupported content type', { cause: error })
    default:
      if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
        return new GatewayError('INVALID_REQUEST', 'the request could not be read', { cause: error })
      }
      return new GatewayError('INTERNAL_ERROR', 'the gateway failed to handle the request', { cause: error })
  }
}

export function toGatewayError(error: unknown): GatewayError {
  if (isGatewayError(error)) return error
  if (error instanceof Error) return fromFastifyError(error as FastifyError)
  return new GatewayError('INTERNAL_ERROR', 'the gateway failed to handle the request', { cause: error })
}

/** Answers that are the gateway working as designed, not failing: the access log records them. */
const DELIBERATE_5XX = new Set(['OVERLOADED', 'SHUTTING_DOWN'])

/** Logs gateway-side failures; a client that broke off or went away is not one, whatever the error it left. */
function logGatewayError(log: Pick<Logger, 'info' | 'error'>, error: GatewayError, clientGone: boolean, requestId?: string): void {
  if (error.statusCode < 500 || DELIBERATE_5XX.has(error.code)) return
  if (clientGone) log.info({ requestId, error: error.code }, 'client went away before its answer')
  else log.error({ requestId, err: error }, 'gateway error')
}

/** The admin listener's error handler: every error leaves in the SPEC 6 envelope with its request id. */
export function sendGatewayError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const gatewayError = toGatewayError(error)
  logGatewayError(request.log, gatewayError, clientWentAway(request.raw))
  const body = JSON.stringify(buildErrorBody(gatewayError, request.id, roundMs(reply.elapsedTime)))
  return reply
    .code(gatewayError.statusCode)
    .header('x-request-id', request.id)
    .header('content-type', 'application/json; charset=utf-8')
    .send(body)
}

/**
 * The traffic listener's errors, in the same envelope, with the headers the gateway had set for
 * the request (deprecation, `Retry-After`, …). Recorded for the access log. It never throws: it
 * is the last answer a request can get. A response already under way can only be cut.
 */
export function writeGatewayError(traffic: TrafficContext, error: unknown, log: Pick<Logger, 'info' | 'error'>): void {
  const gatewayError = toGatewayError(error)
  traffic.errorCode = gatewayError.code
  logGatewayError(log, gatewayError, traffic.clientGone, traffic.id)
  const response = traffic.response
  // A socket already destroyed (a cut connection) takes no answer; its response reports its end a turn later.
  if (response.headersSent || response.destroyed || response.socket?.destroyed === true) {
    response.destroy()
    return
  }
  const body = JSON.stringify(buildErrorBody(gatewayError, traffic.id, roundMs(performance.now() - traffic.startedAt)))
  const envelope = { 'x-request-id': traffic.id, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }
  // The rest of an oversized body is not read: the connection cannot carry another request.
  const close = gatewayError.code === 'PAYLOAD_TOO_LARGE' ? { connection: 'close' } : undefined
  try {
    response.writeHead(gatewayError.statusCode, { ...traffic.ownHeaders, ...close, ...envelope })
  } catch (headerError) {
    // A header the gateway set could not be written: the envelope alone still answers.
    log.error({ requestId: traffic.id, err: headerError }, 'gateway error headers could not be written')
    try {
      response.writeHead(gatewayError.statusCode, { ...close, ...envelope })
    } catch {
      response.destroy()
      return
    }
  }
  response.end(body)
}

export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000
}
