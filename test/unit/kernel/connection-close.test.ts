import type { ServerResponse } from 'node:http'
import { connect, createServer, type AddressInfo, type Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { cutAnswer, noteFraming } from '../../../src/kernel/connection-close.js'

/*
 * An answer delimited by its connection's close is cut with a reset (RFC 9112 6.3: a FIN would end
 * it as if whole). One still queued behind a pipelined answer owns no socket yet: cutting it must
 * not reset the connection under the answer ahead of it. Node gives no such queued answer a
 * socket to pipeline on from a test's request, so the response here is a stand-in on a real
 * connection.
 */

let closeAll: (() => void) | undefined

afterEach(() => {
  closeAll?.()
  closeAll = undefined
})

async function connectionPair(): Promise<{ server: Socket; client: Socket }> {
  const listener = createServer()
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
  const accepted = new Promise<Socket>((resolve) => listener.once('connection', resolve))
  const client = connect((listener.address() as AddressInfo).port, '127.0.0.1')
  client.on('error', () => undefined)
  const server = await accepted
  closeAll = () => {
    client.destroy()
    server.destroy()
    listener.close()
  }
  return { server, client }
}

function answer(socket: Socket | null): ServerResponse & { destroyed: boolean } {
  const response = { socket, chunkedEncoding: false, writableFinished: false, destroyed: false, destroy: () => void (response.destroyed = true) }
  return response as unknown as ServerResponse & { destroyed: boolean }
}

describe('cutAnswer', () => {
  it('resets the connection of a close-delimited answer that owns it', async () => {
    const { server, client } = await connectionPair()
    const ended = new Promise<string>((resolve) => {
      client.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'))
      client.on('end', () => resolve('end'))
    })
    const response = answer(server)
    noteFraming(response, server, false)
    cutAnswer(response, server)
    expect(response.destroyed).toBe(true)
    expect(await ended).toBe('ECONNRESET')
  })

  it('leaves the connection to the answer ahead of a queued one (no socket yet) that is cut', async () => {
    const { server } = await connectionPair()
    const queued = answer(null)
    noteFraming(queued, server, false)
    cutAnswer(queued, server)
    expect(queued.destroyed).toBe(true)
    expect(server.destroyed).toBe(false)
  })
})
