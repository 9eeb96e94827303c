import type { FastifyInstance } from 'fastify'
import { buildErrorBody, mapToSimulatorError, SimulatorError } from './errors.js'
import { buildMeta } from './meta.js'

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
