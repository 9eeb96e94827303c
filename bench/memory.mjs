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
const defaultSets = [{ policy: 'default' }, { policy: 'strict', route: 'eu-west' }, { policy: 'default', route: 'us-east', risk: 'high' }]

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

// SPEC 12's client registry at as many clients (the goal: at most 1 KiB per client at 100,000):
// the registry a replica keeps with store: memory, filled by the gateway's own recording path,
// 10 legacy routes of one tenant (its maxPerRoute of 10,000 each), one id and one user agent
// string per client as requests bring them (fresh strings, not shared), each client seen twice.
const registry = await measureRegistry(entries)
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
    rssMiB: full.rss / 2 ** 20,
    registry
  })}\n`
)
// Keep the store reachable until after the last measurement.
if (store.size < 0) process.exit(1)

async function measureRegistry(clients) {
  const { ClientRegistry } = await import('../dist/fleet/client-registry.js')
  const { memorySharedStore } = await import('../dist/store/shared-store.js')
  const routes = Array.from({ length: 10 }, (_, i) => `POST /v1/legacy/route-${i}`)
  const bounds = { maxTotal: clients, forTenant: () => ({ maxPerRoute: Math.ceil(clients / routes.length), retentionDays: 90 }) }
  const silent = { info: () => undefined, warn: () => undefined }
  const start = await settledUsage()
  const registry = new ClientRegistry({ store: memorySharedStore(), bounds, flushMs: 2_000, configHash: () => 'bench', logger: silent, sweepMs: 3_600_000 })
  const now = Date.now()
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < clients; i++) {
      // As a request brings them: an id made from a SHA-256, a user agent parsed from the head.
      const clientId = JSON.parse(`"fp:${createHash('sha256').update(`client-${i}`).digest('hex').slice(0, 16)}"`)
      const userAgent = JSON.parse(`"legacy-sdk-java/2.${i % 40}.${i % 7} (Linux; OpenJDK 17.0.${i % 13}) build/${1000 + (i % 500)}"`)
      registry.recordLegacy({ tenant: 'acme', route: routes[i % routes.length], clientId, userAgent, exempt: false, brownout: false, atMs: now + round })
    }
  }
  const filled = await settledUsage()
  const view = await registry.view(new Map([['acme', routes]]), 1)
  const listed = [...view.tenants.get('acme').routes.values()].reduce((sum, route) => sum + route.distinctClients, 0)
  await registry.close()
  const bytes = filled.heapUsed + filled.arrayBuffers - start.heapUsed - start.arrayBuffers
  return { clients, routes: routes.length, heapBytesPerClient: bytes / clients, rssBytesPerClient: (filled.rss - start.rss) / clients, distinctCounted: listed }
}
