import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { freePort } from './free-port.js'
import { listenOnLoopback } from './http-server.js'
import { once, ownedBySuite, ownedByTest } from './teardown.js'

/** One request as a fault upstream saw it, with handles to misbehave on. */
export interface FaultExchange {
  method: string
  url: string
  headers: IncomingHttpHeaders
  /** The whole request body (the handler runs once it has arrived). */
  body: Buffer
  request: IncomingMessage
  response: ServerResponse
  socket: Socket
  /** Resolves when the upstream's side of this exchange closes: answered, or its socket gone. */
  closed: Promise<void>
  /** Whether the response was finished by the handler before the exchange closed. */
  finished(): boolean
}

export type FaultHandler = (exchange: FaultExchange) => void

export interface FaultUpstream {
  url: string
  server: Server
  exchanges: FaultExchange[]
  /** Replaces the behaviour for the requests that arrive from now on. */
  setHandler(handler: FaultHandler): void
  /** Resolves with the next request to arrive, once its body has been read. */
  nextExchange(): Promise<FaultExchange>
  /** Drops every connection (`closeAllConnections`) and stops listening. */
  close(): Promise<void>
}

/** Answers `status` with `body` as JSON. */
export function answerJson(exchange: FaultExchange, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  exchange.response.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  exchange.response.end(text)
}

/** Sends a TCP RST (not a FIN): the closest a loopback server gets to a crashed peer. */
export function resetConnection(exchange: FaultExchange): void {
  exchange.socket.resetAndDestroy()
}

/**
 * A loopback upstream whose behaviour each test sets: answer, reset, stall, send garbage. It
 * records every request and when its side of the exchange closed, so a test can see the
 * gateway cancel a call.
 */
async function launchFaultUpstream(initial: FaultHandler): Promise<FaultUpstream> {
  let handler = initial
  const exchanges: FaultExchange[] = []
  const waiters: Array<(exchange: FaultExchange) => void> = []
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    let finished = false
    response.once('finish', () => {
      finished = true
    })
    const closed = new Promise<void>((resolve) => response.once('close', () => resolve()))
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const exchange: FaultExchange = {
        method: request.method ?? '',
        url: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks),
        request,
        response,
        socket: request.socket,
        closed,
        finished: () => finished
      }
      exchanges.push(exchange)
      waiters.shift()?.(exchange)
      handler(exchange)
    })
  })
  return {
    url: await listenOnLoopback(server),
    server,
    exchanges,
    setHandler(next) {
      handler = next
    },
    nextExchange() {
      return new Promise((resolve) => waiters.push(resolve))
    },
    close: once(() => {
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    })
  }
}

const answerOk: FaultHandler = (exchange) => answerJson(exchange, 200, { ok: true })

/** A fault upstream for the running test, closed when it finishes (see ./teardown.ts). */
export function startFaultUpstream(initial: FaultHandler = answerOk): Promise<FaultUpstream> {
  return ownedByTest('startFaultUpstream', () => launchFaultUpstream(initial), (started) => started.close())
}

/** A fault upstream for every test of the enclosing describe, closed after the last one. */
export function useFaultUpstream(initial: FaultHandler = answerOk): FaultUpstream {
  return ownedBySuite('useFaultUpstream', () => launchFaultUpstream(initial), (started) => started.close())
}

/** An origin where nothing listens: a port that was free a moment ago (free-port.ts). Connections are refused. */
export async function refusingOrigin(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`
}
