import type { Exchange } from './exchange.js'

/** How often the requests still receiving a body are looked at: the limit is kept to about this much. */
const SWEEP_INTERVAL_MS = 1_000

export interface BodyStallWatch {
  /** Looks after a request whose body is still arriving, until it has all come or the request ends. */
  watch(exchange: Exchange): void
  unwatch(exchange: Exchange): void
  /** The watched request `response` answers, if any: a request whose body is still arriving. */
  find(response: object): Exchange | undefined
  stop(): void
}

/**
 * Ends requests whose body stops arriving. Node cuts a request that is still arriving only after
 * its 5-minute `requestTimeout`, and until then it holds an in-flight slot and, for native
 * traffic, an upstream connection: a few clients that start a body and go quiet could fill
 * `limits.maxInFlight` and have every other request shed (SPEC 10). Progress is the socket's
 * `bytesRead`, read once a second, so a body that is arriving costs nothing per chunk.
 */
export function createBodyStallWatch(limitMs: () => number, onStalled: (exchange: Exchange) => void): BodyStallWatch {
  // Unordered: a request leaves by taking the last one's place. Its place and progress are kept on
  // the exchange (exchange.ts): a Map entry and a progress object per request with a body cost
  // about a point of a native request's CPU (docs/performance.md).
  const receiving: Exchange[] = []

  function remove(exchange: Exchange): void {
    const index = exchange.bodyWatchIndex
    if (index === -1) return
    const last = receiving.pop() as Exchange
    if (last !== exchange) {
      receiving[index] = last
      last.bodyWatchIndex = index
    }
    exchange.bodyWatchIndex = -1
  }

  const sweep = setInterval(function findStalledBodies() {
    if (receiving.length === 0) return
    const now = performance.now()
    // A copy: what a cut sets off may end other requests, which leave the list meanwhile.
    for (const exchange of receiving.slice()) {
      if (exchange.bodyWatchIndex === -1) continue
      const socket = exchange.request.socket
      if (exchange.request.complete || socket === null || socket.destroyed) {
        remove(exchange)
        continue
      }
      if (socket.bytesRead !== exchange.bodyBytesSeen) {
        exchange.bodyBytesSeen = socket.bytesRead
        exchange.bodyProgressAt = now
      } else if (exchange.request.readableLength > 0) {
        // Body waiting in the gateway's own buffer: the upstream is not taking it (back-pressure),
        // so the gateway stopped reading, not the client sending. That wait is undici's to time.
        exchange.bodyProgressAt = now
      } else if (now - exchange.bodyProgressAt >= exchange.bodyStallLimitMs) {
        remove(exchange)
        onStalled(exchange)
      }
    }
  }, SWEEP_INTERVAL_MS)
  sweep.unref()
  return {
    watch(exchange) {
      // Watching again starts its progress afresh; it keeps its one place.
      if (exchange.bodyWatchIndex === -1) {
        exchange.bodyWatchIndex = receiving.length
        receiving.push(exchange)
      }
      exchange.bodyBytesSeen = exchange.request.socket?.bytesRead ?? 0
      exchange.bodyProgressAt = exchange.head.startedAt
      // Read as the request starts: a reload meanwhile applies to new requests only (SPEC 8).
      exchange.bodyStallLimitMs = limitMs()
    },
    unwatch: remove,
    // A scan, not a map kept per request: it runs only when a body breaks (client-error.ts).
    find: (response) => receiving.find((exchange) => exchange.response === response),
    stop: () => clearInterval(sweep)
  }
}
