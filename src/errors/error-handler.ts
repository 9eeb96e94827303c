import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { buildErrorBody } from './error-body.js'
import { GatewayError, isGatewayError } from './registry.js'
import type { TrafficContext } from '../traffic/traffic-context.js'

/** Errors fastify itself raises before a handler runs, in SPEC 6 terms. */
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

/** The one error handler: every gateway error leaves in the SPEC 6 envelope with its request id. */
export function sendGatewayError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const gatewayError = toGatewayError(error)
  // The admin listener has no traffic context; its timings start with fastify's own clock.
  const traffic = request.traffic as TrafficContext | null | undefined
  if (traffic) traffic.errorCode = gatewayError.code
  if (gatewayError.statusCode >= 500) request.log.error({ err: gatewayError }, 'gateway error')
  const totalMs = roundMs(!traffic ? reply.elapsedTime : performance.now() - traffic.startedAt)
  return reply
    .code(gatewayError.statusCode)
    .header('x-request-id', request.id)
    .header('content-type', 'application/json; charset=utf-8')
    .send(JSON.stringify(buildErrorBody(gatewayError, request.id, totalMs)))
}

export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000
}
