import { STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { buildErrorBody, mapToSimulatorError, SimulatorError } from './errors.js'
import { buildMeta, newId } from './meta.js'

/**
 * fastify's `frameworkErrors`: a URL it cannot decode (or another error before routing) answers
 * 400 INVALID_REQUEST in the simulator's shape (SPEC 11), not in fastify's own.
 */
export function answerFrameworkError (_error: Error, request: FastifyRequest, reply: FastifyReply): void {
  const invalid = new SimulatorError('INVALID_REQUEST', 'the request URL could not be read')
  void reply.code(invalid.statusCode).send(buildErrorBody(invalid, buildMeta(request)))
}

/** Every error answer, fastify's own included, is `{ error: { code, message }, meta }`. */
export function installErrorReplies (app: FastifyInstance): void {
  app.setErrorHandler(function answerWithError (error, request, reply) {
    const simulatorError = mapToSimulatorError(error)
    if (simulatorError.code === 'INTERNAL_ERROR') request.log.error({ err: error }, 'simulator handler failed')
    return reply.code(simulatorError.statusCode).send(buildErrorBody(simulatorError, buildMeta(request)))
  })

  app.setNotFoundHandler(function answerNotFound (request, reply) {
    const notFound = new SimulatorError('NOT_FOUND', `no route for ${request.method} ${request.url.split('?')[0] ?? ''}`)
    return reply.code(notFound.statusCode).send(buildErrorBody(notFound, buildMeta(request)))
  })
}

function refusedByParser (code: string | undefined): SimulatorError {
  if (code === 'HPE_HEADER_OVERFLOW') return new SimulatorError('REQUEST_HEADERS_TOO_LARGE', 'the request headers are too large')
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT') return new SimulatorError('REQUEST_TIMEOUT', 'the request was not received in time')
  return new SimulatorError('INVALID_REQUEST', 'the request is not valid HTTP/1.1')
}

/**
 * fastify's `clientErrorHandler`: a request Node's parser refuses (headers over its limit, which
 * the gateway's own forwarded headers can tip a native call into; broken framing; too slow) is
 * answered in the simulator's shape too, then the connection is closed as fastify's default does.
 */
export function answerClientError (error: Error & { code?: string }, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  if (socket.writable) {
    const refused = refusedByParser(error.code)
    const body = JSON.stringify(buildErrorBody(refused, { requestId: newId('req'), timingMs: { total: 0 } }))
    socket.write(`HTTP/1.1 ${refused.statusCode} ${STATUS_CODES[refused.statusCode] ?? ''}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
  }
  socket.destroy()
}
