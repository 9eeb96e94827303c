import { createServer, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createUpstreamClient, type StreamTarget, type UpstreamClient } from '../../src/upstream/upstream-client.js'
import { startHttpServer } from '../helpers/http-server.js'
import { ownedByTest } from '../helpers/teardown.js'
import { until } from '../helpers/until.js'

/*
 * SPEC 10: how the upstream client judges the pace of a streamed answer's reader while it holds
 * the upstream paused for it. A body that takes part of what waits is slow, not stalled; one that
 * takes nothing for the call's timeoutMs is reported stalled. A socket on loopback frees its
 * buffer only in 64 KiB windows, so a slow reader's partial progress is made here by a body whose
 * backlog the test sets (the one stand-in in this file; the upstream and undici are real).
 */

/** A body that never drains by itself: its backlog is what the test says, as a socket's buffer shrinking while a client reads. */
class ControlledBody extends Writable {
  backlog = 64 * 1024
  /** `highWaterMark`: 1, so that the upstream is paused at once; a large one takes the whole answer without a pause. */
  constructor(highWaterMark = 1) {
    super({ highWaterMark })
    // The client's teardown cuts the call, which destroys the body with its error.
    this.on('error', () => undefined)
    Object.defineProperty(this, 'writableLength', { get: () => this.backlog })
  }

  override _write(_chunk: unknown, _encoding: BufferEncoding, _done: () => void): void {
    // Never done: what was written waits, as behind a client that does not read.
  }
}

function client(): Promise<UpstreamClient> {
  return ownedByTest('upstream client', async () => createUpstreamClient({ connectTimeoutMs: 5_000 }), (started) => started.destroy())
}

async function streamInto(body: ControlledBody, timeoutMs: number, ends = false): Promise<{ stalledAt: () => number | undefined }> {
  const upstream = await startHttpServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/octet-stream' })
    if (ends) response.end(Buffer.alloc(64 * 1024))
    else response.write(Buffer.alloc(64 * 1024))
  })
  const upstreamClient = await client()
  let stalledAt: number | undefined
  const target: StreamTarget = {
    body,
    onStart: () => {},
    onResponseStart: () => {},
    onInformational: () => {},
    onBodyBytes: () => {},
    onTrailers: () => {},
    onFailure: () => {},
    onBrokenOff: () => {},
    onReaderStalled: () => (stalledAt = body.backlog)
  }
  upstreamClient.stream({ origin: upstream.url, method: 'GET', path: '/v4/export', headers: {}, body: null, timeoutMs }, target)
  return { stalledAt: () => stalledAt }
}

describe('the pace of a streamed answer\'s reader (SPEC 10)', () => {
  it('reports a reader that takes nothing of what waits for timeoutMs as stalled', async () => {
    const body = new ControlledBody()
    const stream = await streamInto(body, 300)
    await until(() => stream.stalledAt() !== undefined, 5_000)
    expect(stream.stalledAt()).toBe(64 * 1024)
  })

  it('waits for a reader that keeps taking some, longer than timeoutMs in all, and reports it only once it stops', async () => {
    const body = new ControlledBody()
    const stream = await streamInto(body, 300)
    // 1 KiB taken every 50 ms for 1.5 s (five times the limit), then nothing more.
    for (let step = 0; step < 30; step++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      expect(stream.stalledAt(), `reported stalled while it still read (step ${step})`).toBeUndefined()
      body.backlog -= 1024
    }
    await until(() => stream.stalledAt() !== undefined, 5_000)
    expect(stream.stalledAt()).toBe(64 * 1024 - 30 * 1024)
  })

  it('reports a reader that takes none of the last of an answer the upstream has ended as stalled (Node emits no finish for it)', async () => {
    // Never paused: the body takes the whole answer into its buffer, and its reader none of it.
    const body = new ControlledBody(1024 * 1024)
    const stream = await streamInto(body, 300, true)
    await until(() => stream.stalledAt() !== undefined, 5_000)
    expect(stream.stalledAt()).toBe(64 * 1024)
    expect(body.writableEnded).toBe(true)
  })

  it('waits for an answer queued behind a pipelined one for its turn, and no longer once its connection is gone', async () => {
    const upstream = await startHttpServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream' })
      response.end(Buffer.alloc(1024 * 1024))
    })
    const upstreamClient = await client()
    const answers: ServerResponse[] = []
    let stalled = 0
    const server = createServer((request, response) => {
      answers.push(response)
      const connection = request.socket
      // The first answer never ends; the second, streamed from the upstream, is queued behind it (no socket yet).
      if (answers.length !== 2) return
      const target: StreamTarget = {
        body: response,
        onStart: () => {},
        onResponseStart: (statusCode) => void response.writeHead(statusCode),
        onInformational: () => {},
        onBodyBytes: () => {},
        onTrailers: () => {},
        onFailure: () => {},
        onBrokenOff: () => {},
        onReaderStalled: () => {
          stalled++
          response.destroy()
        },
        // As the gateway's target says it (forward-stream.ts): no socket yet, on a connection still open.
        waitsForTurn: () => response.socket === null && !connection.destroyed
      }
      upstreamClient.stream({ origin: upstream.url, method: 'GET', path: '/v4/export', headers: {}, body: null, timeoutMs: 100 }, target)
    })
    await ownedByTest('server', () => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve)), () => {
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    })
    const socket = connect((server.address() as { port: number }).port, '127.0.0.1')
    socket.on('error', () => undefined)
    socket.write('GET /first HTTP/1.1\r\nHost: t\r\n\r\nGET /second HTTP/1.1\r\nHost: t\r\n\r\n')
    await until(() => answers.length === 2, 5_000)
    // Several times the limit: still waiting for its turn, not reported stalled.
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(stalled).toBe(0)
    socket.destroy()
    // Node never closes the queued answer; its watch reports it instead of looking at it for ever.
    await until(() => stalled === 1, 5_000)
  })
})
