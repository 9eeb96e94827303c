import { randomUUID } from 'node:crypto'
import { LRUCache } from 'lru-cache'
import { createRedisConnection, type RedisConnection, type StoreLogger } from '../store/redis-connection.js'
import { pendingDeletes } from '../store/pending-deletes.js'
import { buildRedisKeys } from './redis-keys.js'
import { sessionKeyPrefix } from './session-key.js'
import type { LockAttempt, SessionEntry, SessionStore, StartLock } from './session-store.js'

export interface RedisSessionStoreOptions {
  url: string
  keyPrefix: string
  /** Bound of the local LRU in front of Redis (`sessions.maxEntries`). */
  maxEntries: number
  /** A shared entry's life, counted from creation (`sessions.ttlMs`, SPEC 4). */
  ttlMs: number
  /**
   * Life of a start lock: how long a crashed owner can hold up a key; a live owner renews it every
   * third of it while its start runs. A function is read per lock (a reload may change it).
   */
  lockMs: number | (() => number)
  /** How long a waiter waits for a live owner's start before starting its own; default lockMs + 1 s. */
  waitMs?: number | (() => number)
  logger: StoreLogger
  /** How long a local copy of a shared entry is trusted; default min(ttlMs, 5 s). */
  localTtlMs?: number
  /** Waiters look at the shared entry this often; default 25 ms. */
  pollMs?: number
  /** How long `create` waits for the first connection attempt; default 2 s. */
  connectWaitMs?: number
  /** A miss served from this replica's map, or a start made without the lock, because the store is down or hung (SPEC 12's counter). */
  onUnavailable?: () => void
}

export const DEFAULT_LOCAL_TTL_MS = 5_000
const DEFAULT_POLL_MS = 25
const SCAN_COUNT = 500

/** A shared read that Redis did not answer (down, or hung past the command timeout). */
const READ_FAILED: unique symbol = Symbol('read failed')

/** One read of a shared entry, and whether something since (a write, a delete, the start lock, a clear) made its answer too old to keep. */
interface SharedRead {
  promise: Promise<SessionEntry | undefined | typeof READ_FAILED>
  retired: boolean
}

/** Deletes KEYS[1] only while it still holds ARGV[1]: lock release and session eviction. */
const COMPARE_AND_DELETE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
const COMPARE_AND_PEXPIRE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end"
/**
 * `SET key value NX PX` that answers the holder's value when it is held (one round trip; `SET
 * … NX GET` needs Redis 7): nil when taken. KEYS: the lock; ARGV: our value, its life.
 */
const TAKE_OR_READ = "local held = redis.call('GET', KEYS[1]) if held then return held end redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return false"

/** The wait bound an owner wrote after its token (`<uuid> <ms>`); none from a replica that wrote a bare token. */
function holderWaitMs(held: string): number | undefined {
  const space = held.lastIndexOf(' ')
  const ms = space < 0 ? Number.NaN : Number(held.slice(space + 1))
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined
}

export interface RedisSessionStore extends SessionStore {
  readonly startLock: StartLock
  close(): Promise<void>
}

/**
 * The session map shared by replicas (docs/scaling.md): Redis or Valkey holds `key -> session id`
 * with `sessions.ttlMs`; a local LRU in front keeps the hit path off the network. A local
 * copy lives at most `localTtlMs` (and never past the shared entry), so that an eviction or an
 * admin clear on another replica is seen here within that time. While Redis is unreachable
 * the local LRU is the map, entries then living their full `ttlMs` (so an outage does not start
 * a new session every few seconds).
 */
export async function createRedisSessionStore(options: RedisSessionStoreOptions): Promise<RedisSessionStore> {
  const connection = createRedisConnection(options.url, options.logger)
  await connection.firstAttempt(options.connectWaitMs ?? 2_000)
  return buildRedisSessionStore(connection, options, { ownsConnection: true })
}

/** The shared session map on a connection the process shares (SPEC 12's one store); closing it leaves the connection to its owner. */
export function buildRedisSessionStore(connection: RedisConnection, options: Omit<RedisSessionStoreOptions, 'url'>, { ownsConnection }: { ownsConnection: boolean }): RedisSessionStore {
  const keys = buildRedisKeys(options.keyPrefix)
  const localTtlMs = Math.min(options.ttlMs, options.localTtlMs ?? DEFAULT_LOCAL_TTL_MS)
  const local = new LRUCache<string, SessionEntry>({ max: options.maxEntries, ttl: options.ttlMs, updateAgeOnGet: false, ttlAutopurge: false })

  function remember(key: string, entry: SessionEntry, ttlMs: number): SessionEntry {
    local.set(key, entry, { ttl: ttlMs })
    return entry
  }

  /**
   * Reads of the shared entry in flight, by Redis key. When a hot key's local copy runs out,
   * every request in flight for it misses at once, and they share one read. A write, a delete or
   * the start lock of the key here (a clear: every key) retires its read: later looks read again,
   * and what the retired read brings back is answered to its callers but not kept, since it may
   * be the entry just deleted.
   */
  const sharedReads = new Map<string, SharedRead>()

  function readSharedOnce(key: string, tenant: string): Promise<SessionEntry | undefined | typeof READ_FAILED> {
    const redisKey = keys.session(tenant, key)
    const inFlight = sharedReads.get(redisKey)
    if (inFlight !== undefined) return inFlight.promise
    const read: SharedRead = { retired: false, promise: Promise.resolve(undefined) }
    read.promise = readShared(key, tenant, redisKey, read)
      .catch((): typeof READ_FAILED => READ_FAILED)
      .finally(() => {
        if (sharedReads.get(redisKey) === read) sharedReads.delete(redisKey)
      })
    sharedReads.set(redisKey, read)
    return read.promise
  }

  function retireSharedRead(redisKey: string): void {
    const read = sharedReads.get(redisKey)
    if (read === undefined) return
    read.retired = true
    sharedReads.delete(redisKey)
  }

  function retireAllSharedReads(): void {
    for (const read of sharedReads.values()) read.retired = true
    sharedReads.clear()
  }

  /** The shared entry and its remaining life, in one atomic round trip. */
  async function readShared(key: string, tenant: string, redisKey: string, read: SharedRead): Promise<SessionEntry | undefined> {
    const replies = await connection.run((client) => client.multi().get(redisKey).pttl(redisKey).exec())
    const sessionId = replies?.[0]?.[1]
    const remainingMs = replies?.[1]?.[1]
    if (typeof sessionId !== 'string') return undefined
    if (read.retired) return { sessionId, tenant }
    const ttlMs = typeof remainingMs === 'number' && remainingMs > 0 ? Math.min(localTtlMs, remainingMs) : localTtlMs
    return remember(key, { sessionId, tenant }, ttlMs)
  }

  async function writeShared(key: string, entry: SessionEntry): Promise<boolean> {
    try {
      await connection.run((client) => client.set(keys.session(entry.tenant, key), entry.sessionId, 'PX', options.ttlMs))
      return true
    } catch {
      return false
    }
  }

  /** Every shared key matching `pattern`, SCAN by SCAN (never KEYS, which blocks the server). */
  async function scanKeys(pattern: string, onBatch: (batch: string[]) => Promise<void> | void): Promise<void> {
    let cursor = '0'
    do {
      const [next, batch] = await connection.run((client) => client.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT))
      cursor = next
      if (batch.length > 0) await onBatch(batch)
    } while (cursor !== '0')
  }

  /** This replica's copies of `tenant`'s entries whose keys begin with `prefix` (all entries without a tenant). */
  function clearLocal(tenant: string | undefined, prefix: string): number {
    let count = 0
    for (const [key, entry] of local.entries()) {
      if ((tenant === undefined || entry.tenant === tenant) && key.startsWith(prefix) && local.delete(key)) count++
    }
    return count
  }

  function countLocal(): Record<string, number> {
    const counts: Record<string, number> = {}
    for (const entry of local.values()) counts[entry.tenant] = (counts[entry.tenant] ?? 0) + 1
    return counts
  }

  /** Locks this replica gave up taking that the store may still hold: deleted if still theirs (store/pending-deletes.ts). */
  const deleteLater = pendingDeletes(connection, (lockKey, owner) => connection.run((client) => client.eval(COMPARE_AND_DELETE, 1, lockKey, owner)))
  /** The renewals of the locks this store holds: a closed store renews none. */
  const renewals = new Set<NodeJS.Timeout>()
  const configuredLockMs = options.lockMs
  const lockMs = typeof configuredLockMs === 'function' ? configuredLockMs : () => configuredLockMs
  const configuredWaitMs = options.waitMs
  const waitMs = configuredWaitMs === undefined ? () => lockMs() + 1_000 : typeof configuredWaitMs === 'function' ? configuredWaitMs : () => configuredWaitMs
  const startLock: StartLock = {
    pollMs: options.pollMs ?? DEFAULT_POLL_MS,
    get waitMs() {
      return waitMs()
    },
    async acquire(key, tenant): Promise<LockAttempt> {
      if (!connection.isUp()) return { state: 'unavailable' }
      const lockKey = keys.lock(tenant, key)
      // Our token, and how long our start may take: a waiter on another replica, whose config
      // may differ during a rolling reload, waits at least that long for it.
      const owner = `${randomUUID()} ${waitMs()}`
      // The winner looks at the entry once more; that look must read after the lock, not share a
      // read sent before it, which may predate another replica's entry (a second sessions.start).
      retireSharedRead(keys.session(tenant, key))
      try {
        const held = (await connection.run((client) => client.eval(TAKE_OR_READ, 1, lockKey, owner, lockMs()))) as string | null
        if (held !== null) return { state: 'held', holder: held, holderWaitMs: holderWaitMs(held) }
      } catch {
        // A SET that timed out here may still run once a stalled Redis goes on, or be sent again
        // by ioredis on its next connection, leaving a lock nobody owns that every replica would
        // wait out. Not awaited: this replica starts now.
        deleteLater(lockKey, owner)
        // Served without the store (SPEC 12's counter), though it still counted as up: hung.
        options.onUnavailable?.()
        return { state: 'unavailable' }
      }
      // SPEC 4: one start per key across replicas. The lock outlives a start that takes longer
      // than its life (a slow connect comes on top of the upstream timeout), renewed while held;
      // a crashed owner renews nothing, and its lock ends within its life.
      const lifeMs = lockMs()
      const renewal = setInterval(() => {
        void connection.run((client) => client.eval(COMPARE_AND_PEXPIRE, 1, lockKey, owner, lifeMs)).catch(() => undefined)
      }, Math.max(1, Math.floor(lifeMs / 3)))
      renewal.unref()
      renewals.add(renewal)
      return {
        state: 'acquired',
        async release() {
          clearInterval(renewal)
          renewals.delete(renewal)
          // Only our own lock: after an expiry another replica may hold it by now.
          await connection.run((client) => client.eval(COMPARE_AND_DELETE, 1, lockKey, owner)).catch(() => undefined)
        }
      }
    },
    onWaitExpired(key, waitedMs) {
      options.logger.warn({ sessionStore: 'redis', waitedMs, key }, 'gave up waiting for another replica to start a session: starting here')
    }
  }

  return {
    startLock,
    get(key, tenant) {
      // SPEC 4 hit path: a local hit never asks Redis, so a hit costs what it costs in memory.
      const cached = local.get(key)
      if (cached !== undefined || tenant === undefined) return cached
      if (!connection.isUp()) {
        options.onUnavailable?.()
        return cached
      }
      return readSharedOnce(key, tenant).then((entry) => {
        if (entry !== READ_FAILED) return entry
        // A read lost to an outage: each request that shared it goes on without the store (SPEC
        // 12's counter). Counted here when the store is down by now, since the start lock then
        // answers `unavailable` without counting; a store still up but hung is counted when the
        // lock's SET fails.
        if (!connection.isUp()) options.onUnavailable?.()
        return undefined
      })
    },
    async set(key, entry) {
      retireSharedRead(keys.session(entry.tenant, key))
      const shared = connection.isUp() && (await writeShared(key, entry))
      // Without Redis this replica's copy is the map: it lives the entry's whole life.
      remember(key, entry, shared ? localTtlMs : options.ttlMs)
    },
    async deleteIfSession(key, sessionId, tenant) {
      const removedHere = local.peek(key)?.sessionId === sessionId && local.delete(key)
      const redisKey = keys.session(tenant, key)
      retireSharedRead(redisKey)
      if (!connection.isUp()) return removedHere
      // The shared entry is the entry: every replica that saw the stale answer drops its own copy,
      // and only the one that removed the shared one says so, so the fleet counts it once.
      return connection.run((client) => client.eval(COMPARE_AND_DELETE, 1, redisKey, sessionId)).then((deleted) => deleted === 1, () => removedHere)
    },
    async clear(tenant, upstreamOrigin) {
      // Reads in flight may bring back entries from before the clear: none of them is kept. Those
      // sent while it runs may answer before their key is unlinked: their copies go at the end.
      retireAllSharedReads()
      const prefix = tenant === undefined || upstreamOrigin === undefined ? '' : sessionKeyPrefix(upstreamOrigin)
      const localCount = clearLocal(tenant, prefix)
      if (!connection.isUp()) return localCount
      let sharedCount = 0
      try {
        await scanKeys(keys.sessionPattern(tenant, prefix), async (batch) => {
          sharedCount += await connection.run((client) => client.unlink(...batch))
        })
      } catch {
        options.logger.warn({ sessionStore: 'redis', tenant }, "clearing the shared session map failed: only this replica's entries went")
        return localCount
      } finally {
        retireAllSharedReads()
        clearLocal(tenant, prefix)
      }
      return sharedCount
    },
    async countByTenant() {
      if (!connection.isUp()) return countLocal()
      const counts: Record<string, number> = {}
      try {
        await scanKeys(keys.sessionPattern(), (batch) => {
          for (const redisKey of batch) {
            const tenant = keys.tenantOf(redisKey)
            if (tenant !== undefined) counts[tenant] = (counts[tenant] ?? 0) + 1
          }
        })
      } catch {
        return countLocal()
      }
      return counts
    },
    get size() {
      // As the memory store's: expired local copies are not counted.
      local.purgeStale()
      return local.size
    },
    describe: () => ({ kind: 'redis', redis: connection.isUp() ? 'up' : 'down' }),
    close() {
      for (const renewal of renewals) clearInterval(renewal)
      renewals.clear()
      return ownsConnection ? connection.close() : Promise.resolve()
    }
  }
}
