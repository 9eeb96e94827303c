import { monitorEventLoopDelay } from 'node:perf_hooks'
import { GatewayError } from '../errors/registry.js'

/** Seconds a shed client is asked to wait (SPEC 10: 503 with Retry-After). */
export const RETRY_AFTER_SECONDS = 2

export function overloadedError(reason: string): GatewayError {
  return new GatewayError('OVERLOADED', `the gateway is overloaded (${reason}); retry after ${RETRY_AFTER_SECONDS} s`)
}

/**
 * Counts requests in flight against `limits.maxInFlight` (SPEC 10): one counter, entered when a
 * request starts and left when its response closes, finished or aborted, so that the count
 * cannot leak.
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

export interface EventLoopMonitor {
  /** True while the last sample's event-loop delay was over the limit. */
  isLate(): boolean
  stop(): void
}

/** Histogram resolution and how often the delay is sampled: @fastify/under-pressure's defaults. */
const RESOLUTION_MS = 10
const SAMPLE_INTERVAL_MS = 1_000

/**
 * Watches the event-loop delay for `limits.maxEventLoopDelayMs` (SPEC 10) the way
 * @fastify/under-pressure does (Node's `monitorEventLoopDelay`, the mean delay over each second
 * less the histogram's resolution), without its fastify hook: the traffic listener is not a
 * fastify app, and a check per request is one comparison. The gateway recovers by itself once
 * the delay goes.
 */
export function createEventLoopMonitor(maxDelayMs: number): EventLoopMonitor {
  const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
  histogram.enable()
  let delayMs = 0
  const timer = setInterval(function sampleEventLoopDelay() {
    delayMs = Math.max(0, histogram.mean / 1e6 - RESOLUTION_MS)
    // No sample in a whole interval: the loop never came round.
    if (Number.isNaN(delayMs)) delayMs = Infinity
    histogram.reset()
  }, SAMPLE_INTERVAL_MS)
  timer.unref()
  return {
    isLate: () => delayMs > maxDelayMs,
    stop() {
      clearInterval(timer)
      histogram.disable()
    }
  }
}
