import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
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

/** Records the error for the access log and logs gateway-side failures; returns the envelope. */
function prepareErrorBody(gatewayError: GatewayError, request: FastifyRequest, elapsedMs: () => number): string {
  // The admin listener has no traffic context; its timings start with fastify's own clock.
  const traffic = request.traffic as TrafficContext | null | undefined
  if (traffic) traffic.errorCode = gatewayError.code
  // A client that broke off or went away is not a gateway failure, whatever the error it left.
  const clientGone = traffic?.cancelled === true || request.raw.destroyed || request.raw.socket?.destroyed === true
  if (gatewayError.statusCode >= 500) {
    if (clientGone) request.log.info({ error: gatewayError.code }, 'client went away before its answer')
    else request.log.error({ err: gatewayError }, 'gateway error')
  }
  const totalMs = roundMs(traffic ? performance.now() - traffic.startedAt : elapsedMs())
  return JSON.stringify(buildErrorBody(gatewayError, request.id, totalMs))
}

/** The one error handler: every gateway error leaves in the SPEC 6 envelope with its request id. */
export function sendGatewayError(error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const gatewayError = toGatewayError(error)
  const body = prepareErrorBody(gatewayError, request, () => reply.elapsedTime)
  return reply
    .code(gatewayError.statusCode)
    .header('x-request-id', request.id)
    .header('content-type', 'application/json; charset=utf-8')
    .send(body)
}

/** The same envelope for a response taken over from fastify (streamed passthrough). */
export function writeGatewayError(request: FastifyRequest, res: ServerResponse, error: GatewayError, ownHeaders: OutgoingHttpHeaders): void {
  const body = prepareErrorBody(error, request, () => 0)
  if (res.headersSent || res.destroyed) {
    res.destroy()
    return
  }
  res.writeHead(error.statusCode, {
    ...ownHeaders,
    'x-request-id': request.id,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body)
  })
  res.end(body)
}

export function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000
}
