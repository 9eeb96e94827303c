import { connect, createServer, type Socket } from 'node:net'
import { ownedByTest } from './teardown.js'

/** A TCP proxy in front of a real redis-server that can fail the way networks and servers do. */
export interface RedisProxy {
  /** `redis://` URL of the proxy. */
  readonly url: string
  /** Drops every connection and refuses new ones: the store is down for its clients. */
  cut(): void
  /** Keeps the connections and passes nothing more either way: a Redis that stopped answering. */
  hang(): void
  /** Passes until a command whose bytes match `command` arrives, then hangs as `hang()` does (that command not sent). */
  hangAt(command: RegExp): void
  /**
   * The next command whose bytes match `command` reaches Redis and runs; its reply never comes
   * back, and the connection is dropped 200 ms later (a reply lost with its connection).
   */
  loseReplyTo(command: RegExp): void
  /** Accepts and passes again. */
  restore(): void
}

/** A proxy to `targetUrl` for the running test, closed when it finishes. */
export async function startRedisProxy(targetUrl: string): Promise<RedisProxy> {
  const target = new URL(targetUrl)
  const sockets = new Set<Socket>()
  let refusing = false
  let hanging = false
  let losing: RegExp | undefined
  let hangingAt: RegExp | undefined
  const proxy = createServer((client) => {
    if (refusing) return void client.destroy()
    const server = connect(Number(target.port), target.hostname)
    sockets.add(client).add(server)
    let replyLost = false
    client.on('data', (bytes: Buffer) => {
      if (hangingAt !== undefined && hangingAt.test(bytes.toString('latin1'))) {
        hangingAt = undefined
        hanging = true
      }
      if (hanging) return
      server.write(bytes)
      if (losing !== undefined && losing.test(bytes.toString('latin1'))) {
        losing = undefined
        replyLost = true
        setTimeout(() => {
          client.destroy()
          server.destroy()
        }, 200)
      }
    })
    server.on('data', (bytes: Buffer) => {
      if (!hanging && !replyLost) client.write(bytes)
    })
    for (const socket of [client, server]) {
      socket.on('error', () => undefined).on('close', () => {
        client.destroy()
        server.destroy()
        sockets.delete(socket)
      })
    }
  })
  await ownedByTest(
    'startRedisProxy',
    () => new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve)),
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        proxy.close(() => resolve())
      })
  )
  return {
    url: `redis://127.0.0.1:${(proxy.address() as { port: number }).port}`,
    cut() {
      refusing = true
      for (const socket of sockets) socket.destroy()
    },
    hang() {
      hanging = true
    },
    hangAt(command) {
      hangingAt = command
    },
    loseReplyTo(command) {
      losing = command
    },
    restore() {
      refusing = false
      hanging = false
    }
  }
}
