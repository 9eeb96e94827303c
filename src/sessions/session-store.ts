import { LRUCache } from 'lru-cache'
import type { SessionStoreStatus } from '../observability/session-events.js'
import { sessionKeyPrefix } from './session-key.js'

/** One try at a key's start lock. */
export type LockAttempt =
  | { state: 'acquired'; release(): Promise<void> }
  /**
   * Another replica is starting this key's session: `holder` tells one owner's hold from the
   * next (a waiter's wait starts again when the lock changes hands), `holderWaitMs` is how long
   * that owner's start may take (its config's, which a rolling reload may have changed).
   */
  | { state: 'held'; holder?: string; holderWaitMs?: number }
  /** The shared store cannot be asked: this replica starts on its own (a store outage fails no request). */
  | { state: 'unavailable' }

/**
 * A short cross-replica lock per session-map key. It expires by itself, so a crashed owner
 * never blocks a key for longer than the lock's life (docs/scaling.md).
 */
export interface StartLock {
  acquire(key: string, tenant: string): Promise<LockAttempt>
  /** How long a waiter sleeps between two looks at the shared entry. */
  readonly pollMs: number
  /**
   * How long a waiter waits for one owner's start before it starts without the lock: at least
   * this, the owner's own bound when longer, from when that owner took over; never past two of
   * the longest bounds seen from the waiter's arrival (distributed-start.ts).
   */
  readonly waitMs: number
  /** Called when a waiter gave up, having waited `waitedMs` (its own `waitMs`, or an owner's longer one). */
  onWaitExpired?(key: string, waitedMs: number): void
}

export interface SessionEntry {
  readonly sessionId: string
  readonly tenant: string
}

/**
 * Where the session map keeps its entries. The in-memory LRU is the embedded default; a
 * store shared by replicas implements the same contract (methods may then return promises).
 */
export interface SessionStore {
  /** `tenant` lets a shared store find the entry of a key it has not seen yet (its keys name the tenant). */
  get(key: string, tenant?: string): SessionEntry | undefined | Promise<SessionEntry | undefined>
  set(key: string, entry: SessionEntry): void | Promise<void>
  /**
   * Deletes the entry only while it still names `sessionId`, so a newer entry survives. `tenant`
   * finds a shared one. True when this call removed the entry: for a shared store, the shared
   * one (a local copy only while the shared store cannot be reached), so that replicas count it once.
   */
  deleteIfSession(key: string, sessionId: string, tenant: string): boolean | Promise<boolean>
  /**
   * Drops every entry of `tenant` (with `upstreamOrigin`, only those of sessions on that upstream:
   * session-key.ts), or all entries; returns how many went.
   */
  clear(tenant?: string, upstreamOrigin?: string): number | Promise<number>
  countByTenant(): Record<string, number> | Promise<Record<string, number>>
  /** Entries held in this process. */
  readonly size: number
  describe(): SessionStoreStatus
  /** Present on a store shared by replicas: one `sessions.start` per key across all of them (SPEC 4 step 3). */
  readonly startLock?: StartLock
  close?(): Promise<void>
}

export interface MemorySessionStoreOptions {
  maxEntries: number
  /** Counted from creation: a hit does not extend an entry's life (SPEC 4). */
  ttlMs: number
  /** Hears each entry pushed out at `maxEntries` by a newer one: a map too small shows here. */
  onCapacityEvict?: () => void
  /** The clock of the entries' lives, in ms (tests); `performance.now()` when left out. */
  now?: () => number
}

export function createMemorySessionStore(options: MemorySessionStoreOptions): SessionStore {
  const onCapacityEvict = options.onCapacityEvict
  const cache = new LRUCache<string, SessionEntry>({
    max: options.maxEntries,
    ttl: options.ttlMs,
    updateAgeOnGet: false,
    ttlAutopurge: false,
    // A clock of its own is read on every look: lru-cache's reuse of a reading for 1 ms would hide a step of it.
    ...(options.now === undefined ? {} : { perf: { now: options.now }, ttlResolution: 0 }),
    // lru-cache also pushes out an entry that expired unread: only a live one is a session lost.
    ...(onCapacityEvict === undefined ? {} : { dispose: (_entry, key, reason) => reason === 'evict' && cache.getRemainingTTL(key) > 0 && onCapacityEvict() })
  })
  return {
    get: (key) => cache.get(key),
    set: (key, entry) => {
      cache.set(key, entry)
    },
    deleteIfSession: (key, sessionId) => cache.peek(key)?.sessionId === sessionId && cache.delete(key),
    clear: (tenant, upstreamOrigin) => {
      if (tenant === undefined) {
        cache.purgeStale()
        const count = cache.size
        cache.clear()
        return count
      }
      const prefix = upstreamOrigin === undefined ? '' : sessionKeyPrefix(upstreamOrigin)
      let count = 0
      for (const [key, entry] of cache.entries()) {
        if (entry.tenant === tenant && key.startsWith(prefix) && cache.delete(key)) count++
      }
      return count
    },
    countByTenant: () => {
      const counts: Record<string, number> = {}
      for (const entry of cache.values()) counts[entry.tenant] = (counts[entry.tenant] ?? 0) + 1
      return counts
    },
    get size() {
      // lru-cache drops an expired entry only when it is next read (no autopurge timer per entry),
      // so its size counts entries past their TTL until then: the gauge and /admin/sessions would disagree.
      cache.purgeStale()
      return cache.size
    },
    describe: () => ({ kind: 'memory' })
  }
}
