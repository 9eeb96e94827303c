import type { FastifyInstance } from 'fastify'
import { assertMayMutate, readPresentedCredentials, resolveAdminIdentity } from './auth.js'
import { buildMeta } from './meta.js'
import { parsePolicyBody } from './request-bodies.js'
import type { SimulatorState } from './simulator-state.js'

/** Policies list and create: the example admin/config surface of SPEC 11. */
export function registerAdminRoutes (app: FastifyInstance, state: SimulatorState): void {
  app.get('/v4/policies', async function listPolicies (request) {
    resolveAdminIdentity(readPresentedCredentials(request.raw.rawHeaders), state.credentials)
    return { policies: state.policies.list(), meta: buildMeta(request) }
  })

  app.post('/v4/policies', async function createPolicy (request, reply) {
    assertMayMutate(resolveAdminIdentity(readPresentedCredentials(request.raw.rawHeaders), state.credentials))
    const { name, fields } = parsePolicyBody(request.body)
    reply.code(201)
    return { policy: state.policies.create(name, fields), meta: buildMeta(request) }
  })
}
