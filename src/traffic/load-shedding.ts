import underPressure from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import { GatewayError } from '../errors/registry.js'

/** Seconds a shed client is asked to wait (SPEC 10: 503 with Retry-After). */
export const RETRY_AFTER_SECONDS = 2

export interface LoadSheddingOptions {
  /** Read per request, so a reload can change it. */
  maxInFlight: () => number
  /** Fixed at start: @fastify/under-pressure samples the event loop with it. */
  maxEventLoopDelayMs: number
}

function overloaded(reason: string): GatewayError {
  return new GatewayError('OVERLOADED', `the gateway is overloaded (${reason}); retry after ${RETRY_AFTER_SECONDS} s`)
}

/**
 * Sheds load before a request costs anything (SPEC 10): past `limits.maxInFlight` requests in
 * flight, or an event-loop delay over `limits.maxEventLoopDelayMs`, new requests get 503
 * OVERLOADED and `Retry-After` instead of queueing in memory. Both clear by themselves when the
 * load goes. The event-loop side is @fastify/under-pressure; it has no in-flight limit, which
 * is one counter here.
 */
export async function registerLoadShedding(app: FastifyInstance, options: LoadSheddingOptions): Promise<void> {
  let inFlight = 0
  app.addHook('onRequest', function limitInFlight(_request, reply, done) {
    inFlight++
    // 'close' fires once for every response, finished or aborted, so the count cannot leak.
    reply.raw.once('close', () => inFlight--)
    if (inFlight > options.maxInFlight()) {
      reply.header('retry-after', String(RETRY_AFTER_SECONDS))
      return done(overloaded('too many requests in flight'))
    }
    done()
  })
  await app.register(underPressure, {
    maxEventLoopDelay: options.maxEventLoopDelayMs,
    retryAfter: RETRY_AFTER_SECONDS,
    // A rejected promise reaches under-pressure's next(error), and so the one error handler.
    pressureHandler: async function shedOnEventLoopDelay(_request, reply) {
      reply.header('retry-after', String(RETRY_AFTER_SECONDS))
      throw overloaded('event-loop delay over the limit')
    }
  })
}
