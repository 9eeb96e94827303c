import { createServer, type Server } from 'node:http'
import { Server as NetServer, type AddressInfo } from 'node:net'
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
 * Stops accepting at once; resolves once every connection has ended. Idle kept-alive
 * connections are closed `idleCloseMs` later, not at once as `http.Server#close` closes them:
 * Node counts a kept-alive connection idle until it has read the request waiting in it, and a
 * client may still send one on it for a moment after the signal (a request queued in its pool),
 * so closing at once cut requests clients had already sent (the 300 s soak lost 6-20 at its
 * rolling restart). Arriving while the gateway drains, they are answered 503 SHUTTING_DOWN with
 * `connection: close` instead. Connections serving a request close after their answer, which
 * says `connection: close`; one whose answer began before the signal (and so said keep-alive)
 * closes once it has been idle for `idleCloseMs`. The caller cuts whatever is left when its
 * grace period ends.
 */
export function closeServer(server: Server, idleCloseMs: number): Promise<void> {
  if (!server.listening) return Promise.resolve()
  // Node times a connection's keep-alive from the moment it turns idle, with the value of this
  // field then: every connection that turns idle from now on is closed after idleCloseMs of
  // idleness, not swept the moment after its last answer (0 would turn the timeout off).
  server.keepAliveTimeout = Math.max(1, Math.min(server.keepAliveTimeout, idleCloseMs))
  return new Promise((resolve) => {
    let closed = false
    let idleTimer: NodeJS.Timeout | undefined
    // net.Server's own close: it stops accepting now and calls back when the last connection
    // has ended. http.Server's would also close the idle connections in this same turn.
    NetServer.prototype.close.call(server, () => {
      closed = true
      clearTimeout(idleTimer)
      resolve()
    })
    // The connections idle at the signal keep their old keep-alive timers: they are closed once,
    // idleCloseMs after the loop's next poll phase, which reads what already sits in the sockets
    // (an immediate set from an immediate runs after the next poll phase).
    setImmediate(() =>
      setImmediate(() => {
        if (!closed) idleTimer = setTimeout(() => server.closeIdleConnections(), idleCloseMs)
      })
    )
  })
}
