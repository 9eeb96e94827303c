/* global process, gc */
// Part two of the benchmark: memory of the session map at 100,000 entries (the goal in
// docs/performance.md: ≤ 500 bytes per entry). Runs in a fresh `node --expose-gc` process and uses the built store
// and key functions, so the entries are exactly what a running gateway keeps.
// Usage: node --expose-gc bench/memory.mjs [entries]; prints one JSON line.
import { createHash, randomBytes } from 'node:crypto'
import { setImmediate as tick } from 'node:timers/promises'

const entries = Number(process.argv[2] ?? 100_000)
const { createMemorySessionStore } = await import('../dist/sessions/session-store.js')
const { buildSessionKey } = await import('../dist/sessions/session-key.js')
// The gateway's canonical form of the defaults when the build has it, else the same shape.
const translate = await import('../dist/legacy/translate.js').catch(() => ({}))
const canonicalDefaults =
  translate.canonicalDefaults ?? ((defaults) => JSON.stringify([defaults.policy ?? null, defaults.route ?? null, defaults.risk ?? null]))

if (typeof gc !== 'function') throw new Error('run with node --expose-gc')

async function settledUsage() {
  for (let i = 0; i < 4; i++) {
    gc()
    await tick()
  }
  return process.memoryUsage()
}

// A realistic population: 1,000 clients (token fingerprints), a few tenants, 100 state keys
// each, one of three default sets.
const tenants = ['acme', 'globex', 'initech']
// The key names the upstream a session lives on (docs/decisions.md); it is hashed in, so its length costs nothing per entry.
const upstreamOrigin = (tenant) => `https://v4.${tenant}.example`
const fingerprints = Array.from({ length: 1000 }, (_, i) => createHash('sha256').update(`tok_client_${i}_${randomBytes(8).toString('hex')}`).digest('hex'))
const defaultSets = [{ policy: 'default' }, { policy: 'strict', route: 'eu-west' }, { policy: 'default', route: 'us-east', risk: 'high' }].map(canonicalDefaults)

const before = await settledUsage()
const store = createMemorySessionStore({ maxEntries: entries, ttlMs: 15 * 60_000 })
const empty = await settledUsage()
for (let i = 0; i < entries; i++) {
  const tenant = tenants[i % tenants.length]
  const key = buildSessionKey(tenant, upstreamOrigin(tenant), fingerprints[i % fingerprints.length], `state-${Math.floor(i / fingerprints.length)}-${i}`, defaultSets[i % defaultSets.length])
  // A flat string, as JSON.parse of a sessions.start answer gives (not a concatenation).
  const sessionId = JSON.parse(`"ses_${randomBytes(16).toString('hex')}"`)
  store.set(key, { sessionId, tenant })
}
const full = await settledUsage()
if (store.size !== entries) throw new Error(`the store holds ${store.size} entries, expected ${entries}`)

const perEntry = (field) => (full[field] - before[field]) / entries
process.stdout.write(
  `${JSON.stringify({
    entries,
    // heapUsed + arrayBuffers: lru-cache keeps its ttl and list bookkeeping in typed arrays.
    heapBytesPerEntry: perEntry('heapUsed') + perEntry('arrayBuffers'),
    heapUsedBytesPerEntry: perEntry('heapUsed'),
    arrayBufferBytesPerEntry: perEntry('arrayBuffers'),
    rssBytesPerEntry: perEntry('rss'),
    emptyStoreBytes: empty.heapUsed + empty.arrayBuffers - before.heapUsed - before.arrayBuffers,
    heapUsedMiB: full.heapUsed / 2 ** 20,
    rssMiB: full.rss / 2 ** 20
  })}\n`
)
// Keep the store reachable until after the last measurement.
if (store.size < 0) process.exit(1)
