import { connect, type Socket } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildRawRequest } from '../helpers/raw-http.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { startSimulator, type StartedSimulator } from '../helpers/start-simulator.js'

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

/**
 * SPEC 9: on shutdown in-flight requests finish. A request a client sent on a kept-alive
 * connection just before the signal may still sit unread in the socket; to Node that connection
 * looks idle, and closing idle connections in that same turn cut the request unanswered (the
 * 300 s soak lost 20 requests at its rolling restart that way).
 */
describe('closing the gateway while requests sit unread on kept-alive connections', () => {
  let sim: StartedSimulator
  let gw: StartedGateway

  beforeAll(async () => {
    sim = await startSimulator()
    gw = await startGateway(testConfig(sim.url))
  })
  afterAll(async () => {
    await gw.close()
    await sim.close()
  })

  it('answers every request already sent (503 SHUTTING_DOWN, connection: close), cutting none', async () => {
    const { host, port } = new URL(gw.url)
    const connections = await Promise.all(
      Array.from({ length: CONNECTIONS }, () => new Promise<KeptAlive>((resolve) => {
        const socket = connect(Number(port), '127.0.0.1', () => resolve(new KeptAlive(socket)))
      }))
    )
    // One answered request each, so every connection is kept alive and idle.
    const first = await Promise.all(connections.map(async (connection, index) => {
      connection.socket.write(request(host, `warm-${index}`))
      return connection.nextResponse()
    }))
    for (const response of first) expect(response).toMatch(/^HTTP\/1\.1 200 /)

    // Written in this turn of the event loop, so the gateway has read none of them when close() begins.
    for (const [index, connection] of connections.entries()) connection.socket.write(request(host, `late-${index}`))
    const closed = gw.gateway.close()
    const answers = await Promise.all(connections.map((connection) => connection.nextResponse()))
    await closed
    // A second close (a signal after a caller, say) waits for the same end instead of failing.
    await gw.close()

    for (const answer of answers) {
      expect(answer).toMatch(/^HTTP\/1\.1 503 /)
      expect(answer).toMatch(/\r\nconnection: close\r\n/i)
      expect(answer).toContain('"SHUTTING_DOWN"')
    }
    // Each answer said so, and the gateway closed every connection after it.
    await Promise.all(connections.map((connection) => connection.whenClosed))
  })
})

describe('kept-alive connections after close began', () => {
  let sim: StartedSimulator
  let gw: StartedGateway

  beforeAll(async () => {
    sim = await startSimulator()
    // The default shutdown.idleCloseMs (1 s): wide enough that a slow machine cannot make the 50 ms below late.
    gw = await startGateway(testConfig(sim.url))
  })
  afterAll(async () => {
    await gw.close()
    await sim.close()
  })

  it('answers a request sent on an idle one within shutdown.idleCloseMs, refuses new ones, then closes the idle ones', async () => {
    const { host, port } = new URL(gw.url)
    const open = (): Promise<KeptAlive> =>
      new Promise((resolve) => {
        const socket = connect(Number(port), '127.0.0.1', () => resolve(new KeptAlive(socket)))
      })
    const [late, idle] = await Promise.all([open(), open()])
    for (const connection of [late, idle]) {
      connection.socket.write(request(host, 'warm'))
      expect(await connection.nextResponse()).toMatch(/^HTTP\/1\.1 200 /)
    }

    const closed = gw.gateway.close()
    // A client whose request was queued in its pool sends it a moment after the signal.
    await new Promise((resolve) => setTimeout(resolve, 50))
    late.socket.write(request(host, 'late'))
    const answer = await late.nextResponse()
    expect(answer).toMatch(/^HTTP\/1\.1 503 /)
    expect(answer).toMatch(/\r\nconnection: close\r\n/i)
    await late.whenClosed

    const refused = await new Promise<string | undefined>((resolve) => {
      const socket = connect(Number(port), '127.0.0.1', () => resolve(undefined))
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code))
    })
    expect(refused).toBe('ECONNREFUSED')

    // The connection that stayed idle is closed once shutdown.idleCloseMs has passed.
    expect(idle.closed).toBe(false)
    await idle.whenClosed
    await closed
  })
})
