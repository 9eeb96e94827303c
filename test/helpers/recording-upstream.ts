import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { listenOnLoopback } from './http-server.js'
import { once, ownedBySuite, ownedByTest } from './teardown.js'

export interface RecordedRequest {
  method: string
  url: string
  headers: IncomingHttpHeaders
  rawHeaders: string[]
  body: Buffer
}

export type UpstreamHandler = (request: RecordedRequest, response: ServerResponse, raw: IncomingMessage) => void | Promise<void>

export interface RecordingUpstream {
  url: string
  requests: RecordedRequest[]
  server: Server
  close(): Promise<void>
}

/** Answers 200 `{ ok: true }` as JSON unless the test gives a handler. */
function defaultHandler(_request: RecordedRequest, response: ServerResponse): void {
  response.writeHead(200, { 'content-type': 'application/json' })
  response.end(JSON.stringify({ ok: true }))
}

/** Answers 200 with `body` as JSON after `delayMs`: a slow upstream, so requests stay in flight a while. */
export function answerAfter(delayMs: number, body: unknown): UpstreamHandler {
  return (_request, response) => {
    setTimeout(() => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify(body))
    }, delayMs)
  }
}

/**
 * A loopback upstream that records what reached it (after reading each body) and answers
 * with `handler`, which may also misbehave: reset sockets, stall, send garbage.
 */
async function launchRecordingUpstream(handler: UpstreamHandler): Promise<RecordingUpstream> {
  const requests: RecordedRequest[] = []
  const sockets = new Set<Socket>()
  const server = createServer((raw, response) => {
    const chunks: Buffer[] = []
    raw.on('data', (chunk: Buffer) => chunks.push(chunk))
    raw.on('end', () => {
      const recorded = { method: raw.method ?? '', url: raw.url ?? '', headers: raw.headers, rawHeaders: raw.rawHeaders, body: Buffer.concat(chunks) }
      requests.push(recorded)
      void Promise.resolve(handler(recorded, response, raw)).catch(() => response.destroy())
    })
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  return {
    url: await listenOnLoopback(server),
    requests,
    server,
    close: once(
      () =>
        new Promise<void>((resolve) => {
          for (const socket of sockets) socket.destroy()
          server.close(() => resolve())
        })
    )
  }
}

/** A recording upstream for the running test, closed when it finishes (see ./teardown.ts). */
export function startRecordingUpstream(handler: UpstreamHandler = defaultHandler): Promise<RecordingUpstream> {
  return ownedByTest('startRecordingUpstream', () => launchRecordingUpstream(handler), (started) => started.close())
}

/** A recording upstream for every test of the enclosing describe, closed after the last one. */
export function useRecordingUpstream(handler: UpstreamHandler = defaultHandler): RecordingUpstream {
  return ownedBySuite('useRecordingUpstream', () => launchRecordingUpstream(handler), (started) => started.close())
}
