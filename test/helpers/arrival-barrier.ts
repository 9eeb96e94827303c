import type { IncomingMessage } from 'node:http'
import type { StartedGateway } from './start-gateway.js'

export interface ArrivalBarrier {
  /**
   * Settles once the watched gateways together have read the whole of `count` requests (their
   * bodies ended). An upstream that holds its answer on it knows that every caller is inside a
   * gateway before the first one can be answered, so concurrent calls overlap for certain rather
   * than by luck of timing. If they have not all arrived within `timeoutMs` of `watch`, it
   * rejects, saying how many did: a test that awaits it fails instead of going on without the
   * overlap it set out to test.
   */
  arrived: Promise<void>
  /** Starts counting the requests that reach `gateways` (its listeners only observe), and the wait. */
  watch(gateways: readonly StartedGateway[]): void
}

export function arrivalBarrier(count: number, timeoutMs = 5_000): ArrivalBarrier {
  let arrivals = 0
  let open!: () => void
  let fail!: (error: Error) => void
  const arrived = new Promise<void>((resolve, reject) => {
    open = resolve
    fail = reject
  })
  // Awaited by the upstream's handler and by the test; this keeps a rejection nobody awaits yet from being reported as unhandled.
  arrived.catch(() => undefined)
  return {
    arrived,
    watch(gateways) {
      const timer = setTimeout(() => fail(new Error(`only ${arrivals} of ${count} concurrent requests reached the gateway within ${timeoutMs} ms: they did not overlap`)), timeoutMs)
      const countArrival = (request: IncomingMessage): void => {
        request.once('end', () => {
          if (++arrivals < count) return
          clearTimeout(timer)
          open()
        })
      }
      for (const gw of gateways) gw.gateway.trafficServer.on('request', countArrival)
    }
  }
}
