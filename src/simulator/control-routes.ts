import type { FastifyInstance } from 'fastify'
import { parseRevokeKeyBody } from './request-bodies.js'
import type { SimulatorState } from './simulator-state.js'

/**
 * Simulator-only controls for tests that run it in another process. Deliberately unauthenticated:
 * this is a test tool, never a V4 surface.
 */
export function registerControlRoutes (app: FastifyInstance, state: SimulatorState): void {
  app.post('/_simulator/keys/revoke', async function revokeKeyControl (request, reply) {
    state.credentials.revokeKey(parseRevokeKeyBody(request.body))
    return reply.code(204).send()
  })

  app.post<{ Params: { id: string } }>(
    '/_simulator/sessions/:id/expire',
    async function expireSessionControl (request, reply) {
      state.sessions.expire(request.params.id)
      return reply.code(204).send()
    }
  )
}
