import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { Logger } from 'pino'
import type { GatewayError } from '../errors/registry.js'
import { answerClientError, answerConnect, type RefusedUnread } from './client-error.js'
import { cutConnection } from './connection-close.js'

/** The traffic listener's open connections, which the drain goes through (Node lists them for no one else). */
const openConnections = new WeakMap<Server, Set<Socket>>()

/**
 * Per connection, the response it is writing or has queued last, until that one has finished
 * ('finish': all of it handed to the kernel). Pipelined responses finish in order, so a connection
 * without an entry is writing nothing.
 */
const unfinishedResponses = new WeakMap<Socket, ServerResponse>()

function trackResponse(socket: Socket, response: ServerResponse): void {
  unfinishedResponses.set(socket, response)
  // One shared listener, not a closure and `once`'s wrapper per request: 'finish' comes once.
  response.on('finish', untrackResponse)
}

function untrackResponse(this: ServerResponse): void {
  // The request keeps its socket; the response has let go of it by its 'finish'. Not always: a
  // small upload goes to undici as the request itself, and undici lets go of its socket once it
  // has sent it (`request.socket = null`): the entry stays, and the drain reads it as finished.
  const socket = this.req.socket
  if (socket !== null && unfinishedResponses.get(socket) === this) unfinishedResponses.delete(socket)
}

/**
 * The traffic listener's node:http server. Its timeouts are the ones fastify gave it before
 * (docs/decisions.md): kept-alive connections live past the 60 s idle timeout of common load
 * balancers, and a request that never finishes arriving is cut after 5 minutes (408).
 */
export function createTrafficServer(
  handler: { handle(request: IncomingMessage, response: ServerResponse): void; answerBrokenBody?(response: ServerResponse, error: GatewayError): boolean },
  log: Logger,
  onRefusedUnread?: (refusal: GatewayError, refused: RefusedUnread) => void
): Server {
  const handle = (request: IncomingMessage, response: ServerResponse): void => {
    trackResponse(request.socket, response)
    handler.handle(request, response)
  }
  const server = createServer(
    {
      // A missing Host gets the gateway's own 400 envelope (head-checks.ts), not Node's bare one.
      requireHostHeader: false,
      requestTimeout: 300_000,
      keepAliveTimeout: 72_000
    },
    handle
  )
  // Node drops headers past 2,000 silently, which could hide a second credential; the 16 KiB
  // header size limit already bounds the count.
  server.maxHeadersCount = 0
  // What Node refuses before the handler sees a request (malformed HTTP, CONNECT) is a request too:
  // `onRefusedUnread` counts and logs it, as the handler's requests are.
  const answerBrokenBody = handler.answerBrokenBody?.bind(handler)
  server.on('clientError', (error: Error & { code?: string }, socket) => answerClientError(log, error, socket, onRefusedUnread, answerBrokenBody))
  server.on('connect', (_request, socket) => answerConnect(log, socket, onRefusedUnread))
  // An Expect other than 100-continue: served like any request, its expectation ignored (RFC 9110
  // 10.1.1 lets a server do that), rather than Node's bare 417, which skips the gateway's log,
  // metrics and envelope and keeps a draining connection alive.
  server.on('checkExpectation', handle)
  // Expect: 100-continue: served without Node's automatic 100, which the gateway sends itself once
  // it is about to read the body (request-body.ts), so a request it refuses is not uploaded first.
  server.on('checkContinue', handle)
  const connections = new Set<Socket>()
  openConnections.set(server, connections)
  server.on('connection', (socket: Socket) => {
    connections.add(socket)
    socket.once('close', () => connections.delete(socket))
  })
  return server
}

function keepIdleConnections(): void {}

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
 * Stops accepting at once; resolves once every connection has ended. A kept-alive connection
 * is closed once it has been idle for `idleCloseMs`, not at once as `http.Server#close` closes
 * idle ones: Node counts a connection idle until it has read the request waiting in it, and a
 * client may still send one on it for a moment after the signal (a request queued in its pool),
 * so closing at once cut requests clients had already sent (the 300 s soak lost 6-20 at its
 * rolling restart). Arriving while the gateway drains, they are answered 503 SHUTTING_DOWN with
 * `connection: close` instead, as is every answer written from now on.
 *
 * The clock is the socket's own inactivity timeout: bytes arriving restart it, a request that
 * arrives clears it (Node does, for a kept-alive connection), and it starts for a connection
 * serving an answer only when that answer has gone, all of it handed to the kernel (a response
 * whose headers left before the signal said keep-alive). Node's keep-alive timer would add a
 * second to `idleCloseMs`, and its `closeIdleConnections` would close a connection the moment
 * after its last answer, or while a slow reader still has that answer queued. The caller cuts
 * whatever is left when its grace period ends.
 */
export function closeServer(server: Server, idleCloseMs: number): Promise<void> {
  if (!server.listening) return Promise.resolve()
  return new Promise((resolve) => {
    // http.Server's close without its first step, which closes the idle connections in this same
    // turn: the rest of it stops accepting now, calls back when the last connection has ended, and
    // clears the timer that checks the connections' request timeouts (net.Server's close alone
    // left that timer holding the server, and through it the gateway, for the process's life).
    server.closeIdleConnections = keepIdleConnections
    server.close(() => resolve())
    // 0 would turn the timeout off: "at once" is the next turn of the loop.
    const idleMs = Math.max(1, idleCloseMs)
    const closeWhenIdle = (socket: Socket): void => {
      const response = unfinishedResponses.get(socket)
      // An entry whose response has finished is one `untrackResponse` could not remove.
      if (response === undefined || response.writableFinished) socket.setTimeout(idleMs)
      // Once it has gone, the connection may serve the next pipelined answer: look again.
      else
        response.once('close', () => {
          if (!socket.destroyed) closeWhenIdle(socket)
        })
    }
    for (const socket of openConnections.get(server) ?? []) closeWhenIdle(socket)
    // A request arriving while draining holds its connection until its answer has gone (Node
    // clears the timeout only on a connection it had kept alive itself).
    server.on('request', (request: IncomingMessage) => {
      request.socket.setTimeout(0)
      closeWhenIdle(request.socket)
    })
  })
}

/**
 * Cuts every connection still open (the grace period is over), each as `cutConnection` cuts it:
 * one carrying an answer delimited by its close is reset, not ended as if that answer were whole.
 */
export function cutConnections(server: Server): void {
  for (const socket of openConnections.get(server) ?? []) cutConnection(socket)
  server.closeAllConnections()
}
