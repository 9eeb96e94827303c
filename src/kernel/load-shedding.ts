import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks'
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
  /** Requests counted now (SPEC 17's v4gw_requests_in_flight). */
  count(): number
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
    },
    count: () => inFlight
  }
}

export interface EventLoopMonitor {
  /** True while the last sample's event-loop delay was over the limit; false before `start`. */
  isLate(): boolean
  /** Begins sampling; once the gateway listens, as its own start-up is no stalled loop. */
  start(): void
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
 *
 * Sampling starts with `start()`, when the gateway listens: started with the kernel, a second of
 * the gateway's own synchronous start-up on a busy machine (building the rest, the admin app)
 * read as a stalled loop, and the first requests after the ready line got 503.
 */
export function createEventLoopMonitor(maxDelayMs: number): EventLoopMonitor {
  let histogram: IntervalHistogram | undefined
  let timer: NodeJS.Timeout | undefined
  let delayMs = 0
  return {
    isLate: () => delayMs > maxDelayMs,
    start() {
      if (histogram !== undefined) return
      const sampled = monitorEventLoopDelay({ resolution: RESOLUTION_MS })
      histogram = sampled
      sampled.enable()
      timer = setInterval(function sampleEventLoopDelay() {
        delayMs = Math.max(0, sampled.mean / 1e6 - RESOLUTION_MS)
        // No sample in a whole interval: the loop never came round.
        if (Number.isNaN(delayMs)) delayMs = Infinity
        sampled.reset()
      }, SAMPLE_INTERVAL_MS)
      timer.unref()
    },
    stop() {
      clearInterval(timer)
      histogram?.disable()
    }
  }
}
