import type { TrafficContext } from './traffic-context.js'

/** How often the requests still receiving a body are looked at: the limit is kept to about this much. */
const SWEEP_INTERVAL_MS = 1_000

export interface BodyStallWatch {
  /** Looks after a request whose body is still arriving, until it has all come or the request ends. */
  watch(traffic: TrafficContext): void
  unwatch(traffic: TrafficContext): void
  stop(): void
}

/**
 * Ends requests whose body stops arriving. Node cuts a request that is still arriving only after
 * its 5-minute `requestTimeout`, and until then it holds an in-flight slot and, for native
 * traffic, an upstream connection: a few clients that start a body and go quiet could fill
 * `limits.maxInFlight` and have every other request shed (SPEC 10). Progress is the socket's
 * `bytesRead`, read once a second, so a body that is arriving costs nothing per chunk.
 */
export function createBodyStallWatch(limitMs: () => number, onStalled: (traffic: TrafficContext) => void): BodyStallWatch {
  const receiving = new Set<TrafficContext>()
  const sweep = setInterval(function findStalledBodies() {
    const now = performance.now()
    const limit = limitMs()
    for (const traffic of receiving) {
      const socket = traffic.request.socket
      if (traffic.request.complete || socket === null || socket.destroyed) {
        receiving.delete(traffic)
        continue
      }
      if (socket.bytesRead !== traffic.bodyBytesSeen) {
        traffic.bodyBytesSeen = socket.bytesRead
        traffic.bodyProgressAt = now
      } else if (traffic.request.readableLength > 0) {
        // Body waiting in the gateway's own buffer: the upstream is not taking it (back-pressure),
        // so the gateway stopped reading, not the client sending. That wait is undici's to time.
        traffic.bodyProgressAt = now
      } else if (now - traffic.bodyProgressAt >= limit) {
        receiving.delete(traffic)
        onStalled(traffic)
      }
    }
  }, SWEEP_INTERVAL_MS)
  sweep.unref()
  return {
    watch(traffic) {
      traffic.bodyBytesSeen = traffic.request.socket?.bytesRead ?? 0
      traffic.bodyProgressAt = traffic.startedAt
      receiving.add(traffic)
    },
    unwatch: (traffic) => receiving.delete(traffic),
    stop: () => clearInterval(sweep)
  }
}
