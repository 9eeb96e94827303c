import { connect, type Socket } from 'node:net'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { until } from '../helpers/until.js'
import { useFaultUpstream, type FaultExchange } from '../helpers/fault-upstream.js'
import { buildRawRequest } from '../helpers/raw-http.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'

const CONNECTIONS = 20

/** A kept-alive connection that reads whole responses, one at a time. */
class KeptAlive {
  private buffered = ''
  private waiting: ((text: string) => void) | undefined
  closed = false
  /** Resolves when the server has closed the connection. */
  readonly whenClosed: Promise<void>

  constructor(readonly socket: Socket) {
    this.whenClosed = new Promise((resolve) => socket.once('close', () => resolve()))
    socket.setEncoding('latin1')
    socket.on('data', (text: string) => {
      this.buffered += text
      this.deliver()
    })
    socket.on('close', () => {
      this.closed = true
      this.deliver()
    })
    socket.on('error', () => undefined)
  }

  /** The next response's head and body, or '' when the connection closed before one came. */
  nextResponse(): Promise<string> {
    return new Promise((resolve) => {
      this.waiting = resolve
      this.deliver()
    })
  }

  private deliver(): void {
    if (this.waiting === undefined) return
    const end = this.buffered.indexOf('\r\n\r\n')
    const length = end < 0 ? undefined : /\r\ncontent-length: (\d+)/i.exec(this.buffered.slice(0, end))?.[1]
    if (end >= 0 && length !== undefined && this.buffered.length >= end + 4 + Number(length)) {
      const whole = end + 4 + Number(length)
      const response = this.buffered.slice(0, whole)
      this.buffered = this.buffered.slice(whole)
      this.settle(response)
    } else if (this.closed) this.settle('')
  }

  private settle(text: string): void {
    const waiting = this.waiting
    this.waiting = undefined
    waiting?.(text)
  }
}

function request(host: string, input: string): Buffer {
  const body = JSON.stringify({ input })
  return buildRawRequest(
    'POST /v1/headless/runs HTTP/1.1',
    [
      ['host', host],
      ['authorization', 'Bearer demo-token-alice'],
      ['content-type', 'application/json'],
      ['content-length', String(Buffer.byteLength(body))]
    ],
    body
  )
}

/** A kept-alive connection to the gateway, with one answered request on it so that it is idle. */
async function openIdle(gatewayUrl: string, input: string): Promise<KeptAlive> {
  const { host, port } = new URL(gatewayUrl)
  const connection = await new Promise<KeptAlive>((resolve) => {
    const socket = connect(Number(port), '127.0.0.1', () => resolve(new KeptAlive(socket)))
  })
  connection.socket.write(request(host, input))
  expect(await connection.nextResponse()).toMatch(/^HTTP\/1\.1 200 /)
  return connection
}

function expectShuttingDown(answer: string): void {
  expect(answer).toMatch(/^HTTP\/1\.1 503 /)
  expect(answer).toMatch(/\r\nconnection: close\r\n/i)
  expect(answer).toContain('"SHUTTING_DOWN"')
}

/**
 * SPEC 9: on shutdown in-flight requests finish. A request a client sent on a kept-alive
 * connection can still sit unread in the socket when the signal comes, or be sent a moment
 * after it (queued in the client's pool); to Node that connection looks idle, and Node's
 * `server.close()` closes idle connections at once: the 300 s soak lost 6-20 requests at its
 * rolling restart that way. The gateway stops accepting at once and closes idle connections
 * `shutdown.idleCloseMs` (default 1 s) later.
 */
describe('closing the gateway with kept-alive connections open', () => {
  const sim = useSimulator()
  let gw: StartedGateway
  // Closing is the test: a fresh gateway per case.
  beforeEach(async () => {
    gw = await startGateway(testConfig(sim.url))
  })

  it('answers every request already sent but not yet read (503 SHUTTING_DOWN, connection: close), cutting none', async () => {
    const host = new URL(gw.url).host
    const connections = await Promise.all(Array.from({ length: CONNECTIONS }, (_, index) => openIdle(gw.url, `warm-${index}`)))

    // Written in this turn of the event loop, so the gateway has read none of them when close() begins.
    for (const [index, connection] of connections.entries()) connection.socket.write(request(host, `late-${index}`))
    const closed = gw.gateway.close()
    const answers = await Promise.all(connections.map((connection) => connection.nextResponse()))
    await closed
    // A second close (a signal after a caller, say) waits for the same end instead of failing.
    await gw.close()

    for (const answer of answers) expectShuttingDown(answer)
    // Each answer said so, and the gateway closed every connection after it.
    await Promise.all(connections.map((connection) => connection.whenClosed))
  })

  it('answers a request sent on an idle one within shutdown.idleCloseMs, refuses new ones, then closes the idle ones', async () => {
    const [late, idle] = await Promise.all([openIdle(gw.url, 'warm-late'), openIdle(gw.url, 'warm-idle')])

    const closed = gw.gateway.close()
    // A client whose request was queued in its pool sends it a moment after the signal; the
    // default 1 s is wide enough that a slow machine cannot make these 50 ms late.
    await new Promise((resolve) => setTimeout(resolve, 50))
    late.socket.write(request(new URL(gw.url).host, 'late'))
    expectShuttingDown(await late.nextResponse())
    await late.whenClosed

    const refused = await new Promise<string | undefined>((resolve) => {
      const socket = connect(Number(new URL(gw.url).port), '127.0.0.1', () => resolve(undefined))
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code))
    })
    expect(refused).toBe('ECONNREFUSED')

    // The connection that stayed idle is closed once shutdown.idleCloseMs has passed.
    expect(idle.closed).toBe(false)
    await idle.whenClosed
    await closed
  })
})

describe('closing the gateway with a kept-alive connection whose last request was a small native upload', () => {
  const sim = useSimulator()

  it('closes it once idle for shutdown.idleCloseMs, not at the end of the grace period', async () => {
    // A body of 64 KiB or less goes to undici as the request itself, which undici lets go of
    // (`request.socket = null`) once it has sent it: the drain must still see the answer as gone.
    const gw = await startGateway(testConfig(sim.url, { shutdown: { graceMs: 60_000 } }))
    const { host, port } = new URL(gw.url)
    const idle = await new Promise<KeptAlive>((resolve) => {
      const socket = connect(Number(port), '127.0.0.1', () => resolve(new KeptAlive(socket)))
    })
    const body = JSON.stringify({ input: 'small native upload' })
    idle.socket.write(
      buildRawRequest(
        'POST /v4/execute HTTP/1.1',
        [
          ['host', host],
          ['authorization', 'Bearer demo-token-alice'],
          ['content-type', 'application/json'],
          ['content-length', String(Buffer.byteLength(body))]
        ],
        body
      )
    )
    expect(await idle.nextResponse()).toMatch(/^HTTP\/1\.1 200 /)

    const closed = gw.gateway.close()
    // 1 s idle against a 60 s grace: 15 s tells them apart on any machine.
    await Promise.race([idle.whenClosed, new Promise((resolve) => setTimeout(resolve, 15_000))])
    expect(idle.closed).toBe(true)
    await closed
  }, 30_000)
})

/**
 * A response whose headers left before the signal said keep-alive; when its body ends during
 * the drain, its connection turns idle, and the client may send its next request on it at once.
 * That connection is closed once it has been idle for `shutdown.idleCloseMs` (not left open until
 * the grace period cuts it, nor swept the moment after its answer).
 */
describe('closing the gateway while a kept-alive response is still streaming', () => {
  const IDLE_CLOSE_MS = 1_000
  let exchange: FaultExchange | undefined
  const upstream = useFaultUpstream((arrived) => {
    exchange = arrived
    arrived.response.writeHead(200, { 'content-type': 'text/plain' })
    arrived.response.write('first;')
  })
  let gw: StartedGateway
  // Closing is the test: a fresh gateway per case.
  beforeEach(async () => {
    exchange = undefined
    gw = await startGateway(testConfig(upstream.url, { shutdown: { idleCloseMs: IDLE_CLOSE_MS, graceMs: 30_000 } }))
  })
  // Before the gateway's own close (when the test finishes): a response left streaming would hold it.
  afterEach(() => {
    exchange?.response.end()
  })

  /** A raw connection to the gateway that keeps what it reads. */
  async function openRaw(): Promise<{ socket: Socket; host: string; received: () => string; closedAt: Promise<number> }> {
    const { host, port } = new URL(gw.url)
    const socket = await new Promise<Socket>((resolve) => {
      const opened = connect(Number(port), '127.0.0.1', () => resolve(opened))
    })
    let received = ''
    socket.setEncoding('latin1')
    socket.on('data', (text: string) => (received += text))
    socket.on('error', () => undefined)
    const closedAt = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())))
    return { socket, host, received: () => received, closedAt }
  }

  /** A raw connection with a native GET whose answer has begun (headers and a first chunk). */
  async function openStreaming(): Promise<Awaited<ReturnType<typeof openRaw>>> {
    const connection = await openRaw()
    connection.socket.write(buildRawRequest('GET /v4/stream HTTP/1.1', [['host', connection.host]]))
    await until(() => connection.received().includes('first;'), 5_000, 10)
    expect(connection.received()).not.toMatch(/\r\nconnection: close\r\n/i)
    return connection
  }

  it('closes the connection once the response that began before the signal has ended and stayed idle for idleCloseMs', async () => {
    const connection = await openStreaming()
    const closed = gw.gateway.close()
    await new Promise((resolve) => setTimeout(resolve, 300))
    const endedAt = Date.now()
    ;(exchange as FaultExchange).response.end('rest')
    const closedAt = await connection.closedAt
    await closed
    expect(connection.received()).toContain('rest')
    // idleCloseMs of idleness: not at once, not Node's keep-alive timer (a second more), and far
    // inside the 30 s grace and the 72 s keep-alive.
    expect(closedAt - endedAt).toBeGreaterThanOrEqual(IDLE_CLOSE_MS - 100)
    expect(closedAt - endedAt).toBeLessThan(IDLE_CLOSE_MS + 800)
  })

  it('answers a request sent on it just after that response ended, when idleCloseMs since the signal has passed (503, connection: close)', async () => {
    const connection = await openStreaming()
    const closed = gw.gateway.close()
    // The answer ends just before idleCloseMs after the signal, when the connections idle at the
    // signal are closed; the client's next request comes right after.
    await new Promise((resolve) => setTimeout(resolve, IDLE_CLOSE_MS - 20))
    ;(exchange as FaultExchange).response.end('rest')
    await until(() => connection.received().includes('rest'), 5_000, 5)
    await new Promise((resolve) => setTimeout(resolve, 60))
    connection.socket.write(request(new URL(gw.url).host, 'after-stream'))
    await connection.closedAt
    await closed
    const afterStream = connection.received().slice(connection.received().indexOf('rest') + 'rest'.length)
    expectShuttingDown(afterStream.slice(afterStream.indexOf('HTTP/1.1')))
  })

  it('lets a slow reader take the whole of a large answer written before the signal', async () => {
    const answer = JSON.stringify({ output: 'x'.repeat(6 * 1024 * 1024), meta: { requestId: 'r', timingMs: { total: 1 } } })
    upstream.setHandler((arrived) => {
      exchange = arrived
      arrived.response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) })
      arrived.response.end(answer)
    })
    const { host, port } = new URL(gw.url)
    const socket = await new Promise<Socket>((resolve) => {
      const opened = connect(Number(port), '127.0.0.1', () => resolve(opened))
    })
    socket.on('error', () => undefined)
    const closedAt = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    // The client reads nothing yet: the gateway's answer waits in its socket buffers.
    socket.pause()
    socket.write(request(host, 'large'))
    await until(() => exchange !== undefined, 5_000, 10)
    await new Promise((resolve) => setTimeout(resolve, 200))
    const closed = gw.gateway.close()
    await new Promise((resolve) => setTimeout(resolve, IDLE_CLOSE_MS + 500))
    let received = 0
    socket.on('data', (chunk: Buffer) => (received += chunk.length))
    socket.resume()
    await closedAt
    await closed
    expect(received).toBeGreaterThan(Buffer.byteLength(answer))
  })

  it('keeps a connection open for a pipelined answer still on its way after the one before it has gone', async () => {
    const held = new Map<string, FaultExchange>()
    upstream.setHandler((arrived) => {
      held.set(arrived.url, arrived)
      arrived.response.writeHead(200, { 'content-type': 'text/plain' })
      if (arrived.url === '/v4/first') arrived.response.write('first-begun;')
    })
    const { socket, host, received, closedAt } = await openRaw()
    // Two requests in one write: the second waits behind the first (HTTP/1.1 pipelining).
    socket.write(Buffer.concat([buildRawRequest('GET /v4/first HTTP/1.1', [['host', host]]), buildRawRequest('GET /v4/second HTTP/1.1', [['host', host]])]))
    await until(() => received().includes('first-begun;') && held.has('/v4/second'), 5_000, 10)

    const closed = gw.gateway.close()
    await new Promise((resolve) => setTimeout(resolve, 300))
    held.get('/v4/first')?.response.end('first-done')
    // Longer than idleCloseMs after the first answer has gone: the second is still on its way.
    await new Promise((resolve) => setTimeout(resolve, IDLE_CLOSE_MS + 500))
    held.get('/v4/second')?.response.end('second-done')
    await closedAt
    await closed
    expect(received()).toContain('first-done')
    expect(received()).toContain('second-done')
  })
})
