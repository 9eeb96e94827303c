import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from 'pino'
import { answerClientError, answerConnect } from './client-error.js'
import type { TrafficHandler } from './traffic-handler.js'

/**
 * The traffic listener's node:http server. Its timeouts are the ones fastify gave it before
 * (docs/decisions.md): kept-alive connections live past the 60 s idle timeout of common load
 * balancers, and a request that never finishes arriving is cut after 5 minutes (408).
 */
export function createTrafficServer(handler: TrafficHandler, log: Logger): Server {
  const server = createServer(
    {
      // A missing Host gets the gateway's own 400 envelope (traffic-handler.ts), not Node's bare one.
      requireHostHeader: false,
      requestTimeout: 300_000,
      keepAliveTimeout: 72_000
    },
    handler.handle
  )
  // Node drops headers past 2,000 silently, which could hide a second credential; the 16 KiB
  // header size limit already bounds the count.
  server.maxHeadersCount = 0
  server.on('clientError', (error: Error & { code?: string }, socket) => answerClientError(log, error, socket))
  server.on('connect', (_request, socket) => answerConnect(log, socket))
  return server
}

/** Listens and resolves with the listener's URL. */
export function listen(server: Server, host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen({ host, port }, () => {
      server.off('error', reject)
      const address = server.address() as AddressInfo
      resolve(`http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`)
    })
  })
}

/**
 * Stops accepting and closes idle kept-alive connections (Node 19+ does both in `close()`);
 * resolves once the connections still serving a request have ended.
 *
 * Not in the turn of the event loop that asked for it: a request a client has already sent on a
 * kept-alive connection can sit unread in its socket, and Node counts that connection idle
 * until it reads the request, so closing at once cut such requests unanswered (the 300 s soak
 * lost 20 at its rolling restart). The loop's next poll phase reads them first; arriving while
 * the gateway drains, they are answered 503 SHUTTING_DOWN with `connection: close`.
 */
export async function closeServer(server: Server): Promise<void> {
  if (!server.listening) return
  await nextPollPhase()
  await new Promise<void>((resolve) => server.close(() => resolve()))
}

/** Resolves after the event loop has passed through its poll phase (where sockets are read) once more. */
function nextPollPhase(): Promise<void> {
  // An immediate set from an immediate runs in the next iteration, after that iteration's poll phase.
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)))
}
