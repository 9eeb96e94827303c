import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'

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

/**
 * A loopback upstream that records what reached it (after reading each body) and answers
 * with `handler`, which may also misbehave: reset sockets, stall, send garbage.
 */
export async function startRecordingUpstream(handler: UpstreamHandler = defaultHandler): Promise<RecordingUpstream> {
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      })
  }
}
