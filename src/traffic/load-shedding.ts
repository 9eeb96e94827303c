import underPressure from '@fastify/under-pressure'
import type { FastifyInstance } from 'fastify'
import { GatewayError } from '../errors/registry.js'

/** Seconds a shed client is asked to wait (SPEC 10: 503 with Retry-After). */
export const RETRY_AFTER_SECONDS = 2

export function overloadedError(reason: string): GatewayError {
  return new GatewayError('OVERLOADED', `the gateway is overloaded (${reason}); retry after ${RETRY_AFTER_SECONDS} s`)
}

/**
 * Counts requests in flight against `limits.maxInFlight` (SPEC 10). @fastify/under-pressure
 * has no such limit; it is one counter, entered when a request starts and left when its
 * response closes, finished or aborted, so that the count cannot leak.
 */
export interface InFlightLimiter {
  /** False when the request is over the limit; it then does not count and must not leave. */
  tryEnter(): boolean
  leave(): void
}

export function createInFlightLimiter(maxInFlight: () => number): InFlightLimiter {
  let inFlight = 0
  return {
    tryEnter() {
      if (inFlight >= maxInFlight()) return false
      inFlight++
      return true
    },
    leave() {
      inFlight--
    }
  }
}

/**
 * Sheds load while the event loop is late by more than `limits.maxEventLoopDelayMs` (SPEC 10),
 * with @fastify/under-pressure, which samples the loop with `monitorEventLoopDelay`. New
 * requests get 503 OVERLOADED and `Retry-After`, and the gateway recovers by itself once the
 * delay goes. Registered after the traffic context hook, so a shed request is still logged.
 */
export async function registerEventLoopShedding(app: FastifyInstance, maxEventLoopDelayMs: number): Promise<void> {
  await app.register(underPressure, {
    maxEventLoopDelay: maxEventLoopDelayMs,
    retryAfter: RETRY_AFTER_SECONDS,
    // A rejected promise reaches under-pressure's next(error), and so the one error handler.
    pressureHandler: async function shedOnEventLoopDelay(_request, reply) {
      reply.header('retry-after', String(RETRY_AFTER_SECONDS))
      throw overloadedError('event-loop delay over the limit')
    }
  })
}
