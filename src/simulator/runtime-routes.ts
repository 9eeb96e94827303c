import type { FastifyInstance } from 'fastify'
import { readPresentedCredentials, resolveRuntimeIdentity } from './auth.js'
import { buildEffectiveContext } from './effective-context.js'
import { buildMeta, newId } from './meta.js'
import { parseExecutionBody, parseSessionStartBody } from './request-bodies.js'
import type { SimulatorState } from './simulator-state.js'

/** The three runtime endpoints of contract part 4; bearer session tokens only (part 5). */
export function registerRuntimeRoutes (app: FastifyInstance, state: SimulatorState): void {
  app.post('/v4/sessions.start', async function startSession (request, reply) {
    const identity = resolveRuntimeIdentity(readPresentedCredentials(request.raw.rawHeaders), state.credentials)
    const session = state.sessions.start(identity.subject, parseSessionStartBody(request.body))
    reply.code(201)
    return {
      sessionId: session.id,
      defaults: { ...session.defaults },
      meta: buildMeta(request, { sessionId: session.id })
    }
  })

  app.post<{ Params: { sessionId: string } }>(
    '/v4/sessions/:sessionId/executions.execute',
    async function executeInSession (request, reply) {
      const identity = resolveRuntimeIdentity(readPresentedCredentials(request.raw.rawHeaders), state.credentials)
      const body = parseExecutionBody(request.body)
      const session = state.sessions.resolveForExecution(request.params.sessionId, identity.subject)
      // Contract part 2: only policy and route may be given per execution; risk stays the session's.
      const effective = buildEffectiveContext(
        { policy: body.policy, route: body.route },
        session.defaults,
        state.backendDefaults
      )
      reply.code(200)
      return {
        output: { echo: body.input },
        effective,
        meta: buildMeta(request, { sessionId: session.id, executionId: newId('exe'), lineageId: session.lineageId })
      }
    }
  )

  app.post('/v4/execute', async function executeOneLiner (request, reply) {
    resolveRuntimeIdentity(readPresentedCredentials(request.raw.rawHeaders), state.credentials)
    const body = parseExecutionBody(request.body)
    const effective = buildEffectiveContext(
      { policy: body.policy, route: body.route, risk: body.risk },
      {},
      state.backendDefaults
    )
    reply.code(200)
    return {
      output: { echo: body.input },
      effective,
      meta: buildMeta(request, { executionId: newId('exe'), lineageId: newId('lin') })
    }
  })
}
