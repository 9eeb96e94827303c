import type { Exchange } from './exchange.js'

/** How often the requests still receiving a body are looked at: the limit is kept to about this much. */
const SWEEP_INTERVAL_MS = 1_000

export interface BodyStallWatch {
  /** Looks after a request whose body is still arriving, until it has all come or the request ends. */
  watch(exchange: Exchange): void
  unwatch(exchange: Exchange): void
  stop(): void
}

/** The connection's bytes read when the body last made progress, and when. */
interface Progress {
  bytesSeen: number
  at: number
}

/**
 * Ends requests whose body stops arriving. Node cuts a request that is still arriving only after
 * its 5-minute `requestTimeout`, and until then it holds an in-flight slot and, for native
 * traffic, an upstream connection: a few clients that start a body and go quiet could fill
 * `limits.maxInFlight` and have every other request shed (SPEC 10). Progress is the socket's
 * `bytesRead`, read once a second, so a body that is arriving costs nothing per chunk.
 */
export function createBodyStallWatch(limitMs: () => number, onStalled: (exchange: Exchange) => void): BodyStallWatch {
  const receiving = new Map<Exchange, Progress>()
  const sweep = setInterval(function findStalledBodies() {
    const now = performance.now()
    const limit = limitMs()
    for (const [exchange, progress] of receiving) {
      const socket = exchange.request.socket
      if (exchange.request.complete || socket === null || socket.destroyed) {
        receiving.delete(exchange)
        continue
      }
      if (socket.bytesRead !== progress.bytesSeen) {
        progress.bytesSeen = socket.bytesRead
        progress.at = now
      } else if (exchange.request.readableLength > 0) {
        // Body waiting in the gateway's own buffer: the upstream is not taking it (back-pressure),
        // so the gateway stopped reading, not the client sending. That wait is undici's to time.
        progress.at = now
      } else if (now - progress.at >= limit) {
        receiving.delete(exchange)
        onStalled(exchange)
      }
    }
  }, SWEEP_INTERVAL_MS)
  sweep.unref()
  return {
    watch(exchange) {
      receiving.set(exchange, { bytesSeen: exchange.request.socket?.bytesRead ?? 0, at: exchange.head.startedAt })
    },
    unwatch: (exchange) => receiving.delete(exchange),
    stop: () => clearInterval(sweep)
  }
}
