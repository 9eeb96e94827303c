import { createServer, type RequestListener, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { once, ownedBySuite, ownedByTest } from './teardown.js'

/** A plain node:http server on loopback, for an upstream that must see the request as it streams. */
export interface StartedHttpServer {
  url: string
  server: Server
  /** Drops every connection (`closeAllConnections`) and stops listening. */
  close(): Promise<void>
}

/** Listens on 127.0.0.1, on a port the system picks (never a fixed one); resolves with the base URL. */
export async function listenOnLoopback(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

async function launchHttpServer(listener: RequestListener): Promise<StartedHttpServer> {
  const server = createServer(listener)
  return {
    url: await listenOnLoopback(server),
    server,
    close: once(() => {
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    })
  }
}

/**
 * A server whose `listener` gets each request as Node hands it over, body unread (a recording
 * or fault upstream reads the whole body first), for the running test, closed when it finishes.
 */
export function startHttpServer(listener: RequestListener): Promise<StartedHttpServer> {
  return ownedByTest('startHttpServer', () => launchHttpServer(listener), (started) => started.close())
}

/** The same, for every test of the enclosing describe, closed after the last one. */
export function useHttpServer(listener: RequestListener): StartedHttpServer {
  return ownedBySuite('useHttpServer', () => launchHttpServer(listener), (started) => started.close())
}
