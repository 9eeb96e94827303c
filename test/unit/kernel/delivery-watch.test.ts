import { createServer, type ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { deliver } from '../../../src/kernel/delivery-watch.js'
import { Exchange } from '../../../src/kernel/exchange.js'
import { ownedByTest } from '../../helpers/teardown.js'
import { until } from '../../helpers/until.js'

/**
 * A whole answer's delivery (SPEC 10) on a real node:http server and a real client socket: an
 * answer queued behind a pipelined one waits for its turn, and no longer once its connection is gone.
 */
describe('deliver', () => {
  it('ends the watch of an answer queued behind a pipelined one once the connection is gone, whatever Node does with it', async () => {
    const answers: ServerResponse[] = []
    const server = createServer((request, response) => {
      answers.push(response)
      // The first answer never ends; the second, 1 MiB, is queued behind it (no socket yet).
      if (answers.length === 2) deliver(new Exchange(request, response), Buffer.alloc(1024 * 1024), 1024 * 1024, 100)
    })
    await ownedByTest('server', () => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve)), () => {
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    })
    const { port } = server.address() as { port: number }
    const client = connect(port, '127.0.0.1')
    client.on('error', () => undefined)
    client.write('GET /first HTTP/1.1\r\nHost: t\r\n\r\nGET /second HTTP/1.1\r\nHost: t\r\n\r\n')
    await until(() => answers.length === 2, 5_000)
    const queued = answers[1] as ServerResponse
    expect(queued.socket).toBeNull()
    // Several times the watch's period: still waiting for its turn, not cut.
    await new Promise((resolve) => setTimeout(resolve, 350))
    expect(queued.destroyed).toBe(false)
    client.destroy()
    // Node never closes the queued answer; the watch ends it instead of looking at it for ever.
    await until(() => queued.destroyed, 5_000)
  })
})
