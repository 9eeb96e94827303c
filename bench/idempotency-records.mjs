/* global console, process, URL, Buffer, performance */
// node bench/idempotency-records.mjs [--ops N] [--concurrency C]
//
// The price of SPEC 16's records alone, without HTTP around them: N fresh keys, each claimed and
// then completed with a 200-byte answer (what every keyed request of gateway-execute-keyed does),
// C at a time, on this replica's memory records and on a throwaway redis-server on loopback. Prints
// this process's CPU µs and the wall time per claim + stored result. Uses the build in dist/.
// Loopback only; ends only the redis-server it started, by PID.
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'

const { values: flags } = parseArgs({ options: { ops: { type: 'string', default: '20000' }, concurrency: { type: 'string', default: '50' } } })
const OPS = Number(flags.ops)
const CONCURRENCY = Number(flags.concurrency)
const BOUNDS = { maxEntries: 10_000, maxBytes: 67_108_864 }
const ANSWER = { statusCode: 200, body: Buffer.alloc(200, 0x61), contentType: 'application/json', sessionId: undefined }
const FINGERPRINT = 'f'.repeat(64)
const QUIET = { info: () => undefined, warn: () => undefined }

const { createSharedIdempotencyStore } = await import(new URL('../dist/sessions/shared-idempotency-store.js', import.meta.url).href)
const { createSharedStore, memorySharedStore } = await import(new URL('../dist/store/shared-store.js', import.meta.url).href)

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

async function measure(name, records) {
  let next = 0
  async function worker() {
    while (next < OPS) {
      next++
      const key = randomBytes(32).toString('hex')
      const claim = await records.claim(key, FINGERPRINT, 70_000, BOUNDS)
      if (!claim.claimed || claim.unavailable === true) throw new Error(`${name}: a fresh key was not claimed in the store`)
      await records.complete(key, claim.owner, ANSWER, 86_400_000, BOUNDS)
    }
  }
  // A warm-up of at most 2,000 keys, then the measured run of OPS keys.
  next = Math.max(0, OPS - Math.min(2_000, OPS))
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  next = 0
  const cpuBefore = process.cpuUsage()
  const startedAt = performance.now()
  await Promise.all(Array.from({ length: CONCURRENCY }, worker))
  const wallMs = performance.now() - startedAt
  const cpu = process.cpuUsage(cpuBefore)
  console.log(`${name}: ${((cpu.user + cpu.system) / OPS).toFixed(1)} µs CPU and ${((wallMs * 1000) / OPS).toFixed(1)} µs wall per claim + stored result (${OPS} fresh keys, ${CONCURRENCY} at a time)`)
}

await measure('memory records', createSharedIdempotencyStore(memorySharedStore()))

const port = await freePort()
const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
try {
  await sleep(300)
  const shared = await createSharedStore({ kind: 'redis', url: `redis://127.0.0.1:${port}`, keyPrefix: 'bench:', logger: QUIET })
  if (!shared.isUp()) throw new Error('redis-server did not answer')
  await measure('Redis records', createSharedIdempotencyStore(shared))
  await shared.close()
} finally {
  redis.kill('SIGKILL')
}
