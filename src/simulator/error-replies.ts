import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { buildErrorBody, mapToSimulatorError, SimulatorError } from './errors.js'
import { buildMeta } from './meta.js'

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
