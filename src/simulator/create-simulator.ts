import Fastify from 'fastify'
import type { AddressInfo } from 'node:net'
import { installBodyParsers } from './body-parsers.js'
import { CallRecorder } from './call-recorder.js'
import { registerAdminRoutes } from './admin-routes.js'
import { registerControlRoutes } from './control-routes.js'
import { CredentialDirectory } from './credential-directory.js'
import { answerClientError, answerFrameworkError, installErrorReplies } from './error-replies.js'
import { SimulatorError } from './errors.js'
import { markRequestStart, newId } from './meta.js'
import { resolveSimulatorOptions } from './options.js'
import { PolicyStore } from './policy-store.js'
import { registerRuntimeRoutes } from './runtime-routes.js'
import { SessionStore } from './session-store.js'
import type { SimulatorState } from './simulator-state.js'
import type { Simulator, SimulatorOptions } from './types.js'

/** A base URL clients can dial: a wildcard bind address is reachable on loopback. */
function baseUrlOf (address: AddressInfo): string {
  if (address.address === '0.0.0.0') return `http://127.0.0.1:${address.port}`
  if (address.address === '::') return `http://[::1]:${address.port}`
  const host = address.address.includes(':') ? `[${address.address}]` : address.address
  return `http://${host}:${address.port}`
}

/** The built-in V4 simulator (SPEC 11): an in-memory implementation of the V4 contract. */
export function createSimulator (options: SimulatorOptions = {}): Simulator {
  const resolved = resolveSimulatorOptions(options)
  const state: SimulatorState = {
    credentials: new CredentialDirectory(resolved.sessionTokens, resolved.serviceKeys),
    sessions: new SessionStore(resolved.sessionTtlMs),
    policies: new PolicyStore(),
    backendDefaults: resolved.backendDefaults
  }
  const recorder = new CallRecorder()
  let closing: Promise<void> | undefined

  const app = Fastify({
    logger: resolved.logger,
    // meta.requestId is the caller's x-request-id when it sent one: the contract says only that
    // it is always present, and an echo lets a caller's id and the service's meet (a choice,
    // docs/decisions.md; a real V4 may issue its own, which the gateway keeps, SPEC 6).
    requestIdHeader: 'x-request-id',
    genReqId: function generateRequestId () { return newId('req') },
    // Ids of any length route (fastify's 100-character limit would answer 414 in its own shape);
    // an id nobody issued is then SESSION_NOT_FOUND, as the contract has it.
    routerOptions: { maxParamLength: 8192 },
    frameworkErrors: answerFrameworkError,
    clientErrorHandler: answerClientError,
    // A request on a kept-alive connection during close is refused below, in the simulator's shape.
    return503OnClosing: false
  })

  // Recorded before parsing and auth, so rejected calls still show what reached the upstream.
  const record = resolved.recordCalls
  app.addHook('onRequest', async function recordCall (request, reply) {
    markRequestStart(request)
    if (record) recorder.record(request)
    if (closing !== undefined) {
      // Set here too: fastify sets it only once its own close has begun, a turn later.
      reply.raw.setHeader('connection', 'close')
      throw new SimulatorError('SHUTTING_DOWN', 'the simulator is shutting down')
    }
  })
  installBodyParsers(app, function recordBody (request, body) {
    if (record) recorder.attachBody(request, body)
  })
  installErrorReplies(app)
  registerRuntimeRoutes(app, state)
  registerAdminRoutes(app, state)
  if (resolved.controlRoutes) registerControlRoutes(app, state)

  return {
    app,
    calls: recorder.calls,
    async listen ({ host = '127.0.0.1', port = 0 } = {}) {
      await app.listen({ host, port })
      const address = app.server.address()
      if (address === null || typeof address === 'string') {
        throw new Error('simulator is not listening on a TCP address')
      }
      return baseUrlOf(address)
    },
    countCalls (method, path) {
      return recorder.count(method, path)
    },
    resetCalls () {
      recorder.reset()
    },
    revokeKey (key) {
      state.credentials.revokeKey(key)
    },
    expireSession (sessionId) {
      state.sessions.expire(sessionId)
    },
    sessionCount () {
      return state.sessions.size
    },
    close () {
      // Idempotent: tests and process shutdown may both close it.
      closing ??= app.close()
      return closing
    }
  }
}
