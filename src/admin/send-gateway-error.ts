import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { buildErrorBody, ERROR_CONTENT_TYPE } from '../errors/error-body.js'
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
  return sendErrorEnvelope(reply, gatewayError.statusCode, request.id, buildErrorBody(gatewayError, request.id, roundMs(reply.elapsedTime)))
}

/**
 * An error answer of the admin listener, with SPEC 6's `content-type: application/json` as written:
 * Fastify adds `; charset=utf-8` to any JSON type unless the reply has a serializer of its own,
 * so the text goes out through one that leaves it as it is.
 */
export function sendErrorEnvelope(reply: FastifyReply, statusCode: number, requestId: string, envelope: object): FastifyReply {
  return reply
    .code(statusCode)
    .header('x-request-id', requestId)
    .header('content-type', ERROR_CONTENT_TYPE)
    .serializer(asWritten)
    .send(JSON.stringify(envelope))
}

const asWritten = (text: unknown): string => text as string
