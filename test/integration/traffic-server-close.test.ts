import { spawnSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/spawn-cli.js'

/**
 * A closed traffic listener lets go of its server, and through its request handler of the whole
 * gateway: an embedder (or a test suite) that builds and closes gateways does not keep them all.
 * node:http's connection-check timer, started at listen, held the server until http.Server's own
 * close cleared it; net.Server's close, which the drain used, did not. Read in a process of its
 * own with the garbage collector exposed (a WeakRef to the server after the close and a GC).
 */
const SCRIPT = `
import pino from 'pino'
import { closeServer, createTrafficServer, listen } from './dist/kernel/traffic-server.js'
// In a function of its own: a module's top-level frame may keep what its blocks held.
async function listenAndClose() {
  const server = createTrafficServer({ handle: (_request, response) => response.end() }, pino({ level: 'silent' }))
  await listen(server, '127.0.0.1', 0)
  await closeServer(server, 10)
  return new WeakRef(server)
}
const held = await listenAndClose()
await new Promise((resolve) => setTimeout(resolve, 50))
for (let round = 0; round < 3; round++) {
  globalThis.gc()
  await new Promise((resolve) => setTimeout(resolve, 10))
}
console.log(held.deref() === undefined ? 'collected' : 'kept')
`

describe('closing the traffic listener', () => {
  it('leaves nothing that holds its server (collected after a GC)', () => {
    const run = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', SCRIPT], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 })
    expect(run.stderr).toBe('')
    expect(run.stdout.trim()).toBe('collected')
  })
})
