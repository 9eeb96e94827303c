import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { buildErrorBody } from '../errors/error-body.js'
import { GatewayError, isGatewayError, toGatewayError } from '../errors/registry.js'
import { clientWentAway } from '../kernel/exchange.js'
import { logGatewayError } from '../observability/log-gateway-error.js'
import { roundMs } from '../util/round-ms.js'

/** Errors fastify itself raises before a handler runs, in SPEC 6 terms; the rest as any error. */
function fromFastifyError(error: unknown): GatewayError {
  if (isGatewayError(error)) return error
  switch ((error as FastifyError | undefined)?.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new GatewayError('PAYLOAD_TOO_LARGE', 'request body is too large', { cause: error })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'unsupported content type', { cause: error })
    default:
      return toGatewayError(error)
  }
}

/** The admin listener's error handler: every error leaves in the SPEC 6 envelope with its request id. */
export function sendGatewayError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const gatewayError = fromFastifyError(error)
  logGatewayError(request.log, gatewayError, clientWentAway(request.raw))
  const body = JSON.stringify(buildErrorBody(gatewayError, request.id, roundMs(reply.elapsedTime)))
  return reply
    .code(gatewayError.statusCode)
    .header('x-request-id', request.id)
    .header('content-type', 'application/json')
    .send(body)
}
