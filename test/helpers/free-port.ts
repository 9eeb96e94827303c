import { createServer } from 'node:net'

/**
 * A port nothing listens on at the moment, checked free and released. Picked below Linux's
 * ephemeral range (32768-60999): the system's own pick (port 0) comes from that range, where the
 * listeners and client sockets of tests running alongside are placed too, so a port it picked and
 * freed could be taken again at once (EADDRINUSE for a gateway started on it later, or a call
 * meant to be refused answered 508 by another test's gateway, both seen in CI).
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 12_000)
    const server = createServer()
    const free = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false))
      server.listen(port, '127.0.0.1', () => resolve(true))
    })
    if (!free) continue
    await new Promise<void>((resolve) => server.close(() => resolve()))
    return port
  }
}
