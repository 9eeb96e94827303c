import type { CancelScope } from '../upstream/upstream-client.js'
import { KeyWaiters } from './key-waiters.js'

/**
 * SPEC 16's idempotency records. A record is keyed by a hash of (tenant, the credential's full
 * SHA-256, route, key) and holds only hashes and the answer: never a raw key, token or request
 * body. The claim and the stored answer are one record: a claim is replaced by the answer while
 * its owner still holds it, so there is no moment where a retry finds neither.
 */

/** The answer a retry gets (SPEC 16: status, body, `content-type`, `x-v4-session-id`). */
export interface StoredAnswer {
  readonly statusCode: number
  readonly body: Buffer
  readonly contentType: string | undefined
  readonly sessionId: string | undefined
  /** The gateway's own answer (SPEC 14 `x-v4gw-served-by: gateway`, a kept 504): its replay says so too. */
  readonly madeByGateway?: boolean
}

/** What a key holds: a claim under way, or a finished answer (`answer: null`: too large to keep). */
export type IdempotencyRecord =
  | { readonly state: 'running'; readonly fingerprint: string }
  | { readonly state: 'done'; readonly fingerprint: string; readonly answer: StoredAnswer | null }

/**
 * `unavailable`: the shared store could not be asked, so this replica's own memory answered
 * (SPEC 16 "Store down"; the request's outcome is then `store_unavailable`).
 */
export type ClaimResult =
  | { readonly claimed: true; readonly owner: string; readonly unavailable?: true }
  | { readonly claimed: false; readonly record: IdempotencyRecord; readonly unavailable?: true }

/**
 * Per call, from the config the request started with, so a reload's bounds apply to what comes
 * after it. SPEC 16's `maxEntries` and `maxBytes` are "per replica": the replica's records never
 * pass the largest bounds of the routes holding some, the oldest going first whatever their
 * route, and each route's records never pass its own.
 */
export interface RecordBounds {
  /**
   * Whose records the bounds count: a tenant's route (SPEC 16's settings are a route's, merged
   * over its tenant's), so one route's small bounds never push out another's records.
   */
  readonly group: string
  readonly maxEntries: number
  readonly maxBytes: number
}

export interface IdempotencyStore {
  /**
   * Claims `key` for `leaseMs` when nothing live holds it; otherwise the record that does.
   * `waitingOnRunning`: the caller's last look found this request running under the key (it is a
   * duplicate that waits), so a look the store fails while it still counts as up reads as still
   * running rather than as a store away (one stalled command is not an outage).
   */
  claim(key: string, fingerprint: string, leaseMs: number, bounds: RecordBounds, waitingOnRunning?: boolean): ClaimResult | Promise<ClaimResult>
  /** Extends a claim `owner` still holds; false when it no longer does. */
  renew(key: string, owner: string, leaseMs: number): boolean | Promise<boolean>
  /**
   * Replaces `owner`'s claim by the finished answer, kept `ttlMs`; false (nothing written) when the
   * claim is no longer its; `'local'` when the shared store could not take it and this replica's
   * memory keeps it instead (SPEC 16 "Store down").
   */
  complete(key: string, owner: string, answer: StoredAnswer | null, ttlMs: number, bounds: RecordBounds): boolean | 'local' | Promise<boolean | 'local'>
  /** Deletes `owner`'s claim (an answer not kept, SPEC 16), so that a retry runs. */
  release(key: string, owner: string): void | Promise<void>
  /** Resolves when the key's record is completed or released here, after `waitMs`, or when `scope` is cancelled. */
  changed(key: string, waitMs: number, scope?: CancelScope): Promise<void>
  /** The live record of `key`, read only (`explain`): no claim is made. */
  peek(key: string): IdempotencyRecord | undefined | Promise<IdempotencyRecord | undefined>
  /** Records held in this process. */
  readonly size: number
}

interface MemoryRecord {
  /** The bounds it was written under (`boundsKey`): they, not a later reload's, count it. */
  group: string
  fingerprint: string
  /** Set while a claim is under way. */
  owner: string | undefined
  answer: StoredAnswer | null
  expiresAt: number
  bytes: number
}

/**
 * Whose count a record joins: its route's records written under the same bounds. SPEC 17: records
 * stay until their TTL whatever the new config says, so a reload lowering a route's `maxEntries`
 * pushes out none of the records written before it (a retry of one would run its execution
 * again); the new bounds count the records written after it. The older ones go at their TTL, or
 * as the replica's oldest (their bounds still count among the largest held).
 */
function boundsKey(bounds: RecordBounds): string {
  return `${bounds.group}\u0000${bounds.maxEntries}\u0000${bounds.maxBytes}`
}

/** What a record costs besides its body: the key, the fingerprint and the map's own entry, roughly. */
const RECORD_OVERHEAD_BYTES = 256
/**
 * Ended records dropped, each route's oldest first, at each claim: records of a route no request
 * reads again (a reload removed it) otherwise stayed past their TTL, as nothing else looks at them.
 */
export const SWEEP_PER_CLAIM = 8

/**
 * The replica's own records (SPEC 16 with `store: memory`, and while a shared store is down): a
 * Map in insertion order per route and bounds (`boundsKey`), so a route's oldest go first when its
 * `maxEntries` or `maxBytes` is passed, and the replica's oldest when the largest bounds of the
 * routes holding records are (RecordBounds). A
 * claim under way is never pushed out: it would let a retry run the execution again; claims are
 * as many as the requests in flight.
 */
export interface MemoryIdempotencyStore extends IdempotencyStore {
  claim(key: string, fingerprint: string, leaseMs: number, bounds: RecordBounds): ClaimResult
  renew(key: string, owner: string, leaseMs: number): boolean
  complete(key: string, owner: string, answer: StoredAnswer | null, ttlMs: number, bounds: RecordBounds): boolean
  release(key: string, owner: string): void
  peek(key: string): IdempotencyRecord | undefined
  /** Drops up to `max` ended records, each route's from its oldest on. */
  sweep(max: number): void
}

export function createMemoryIdempotencyStore(now: () => number = Date.now): MemoryIdempotencyStore {
  const records = new Map<string, MemoryRecord>()
  /** The same records by group, each in insertion order, with the bytes they hold and the bounds they last wrote with. */
  const groups = new Map<string, { readonly records: Map<string, MemoryRecord>; bytes: number; bounds: RecordBounds }>()
  /** The bytes of every record (`records` is in insertion order too, oldest first). */
  let totalBytes = 0
  const waiters = new KeyWaiters()
  let owners = 0

  function live(key: string): MemoryRecord | undefined {
    const record = records.get(key)
    if (record === undefined) return undefined
    if (record.expiresAt > now()) return record
    drop(key, record)
    return undefined
  }

  function drop(key: string, record: MemoryRecord): void {
    records.delete(key)
    totalBytes -= record.bytes
    const group = groups.get(record.group)
    if (group === undefined) return
    group.records.delete(key)
    group.bytes -= record.bytes
    if (group.records.size === 0) groups.delete(record.group)
  }

  function put(key: string, record: MemoryRecord, bounds: RecordBounds): void {
    const previous = records.get(key)
    if (previous !== undefined) drop(key, previous)
    records.set(key, record)
    totalBytes += record.bytes
    let group = groups.get(record.group)
    if (group === undefined) groups.set(record.group, (group = { records: new Map(), bytes: 0, bounds }))
    group.bounds = bounds
    group.records.set(key, record)
    group.bytes += record.bytes
    const time = now()
    if (group.records.size > bounds.maxEntries || group.bytes > bounds.maxBytes) pushOut(group.records, key, time, () => group.records.size <= bounds.maxEntries && group.bytes <= bounds.maxBytes)
    // The replica's bound is the largest of the routes holding records: pushing out a route's
    // last record may lower it, so it is read again until nothing more goes.
    for (;;) {
      let maxEntries = 0
      let maxBytes = 0
      for (const { bounds: held } of groups.values()) {
        maxEntries = Math.max(maxEntries, held.maxEntries)
        maxBytes = Math.max(maxBytes, held.maxBytes)
      }
      if (records.size <= maxEntries && totalBytes <= maxBytes) return
      const routesBefore = groups.size
      pushOut(records, key, time, () => records.size <= maxEntries && totalBytes <= maxBytes)
      if (groups.size === routesBefore) return
    }
  }

  /** Drops `from`'s oldest finished (or lapsed) records until `within`, never `keep` nor a claim under way. */
  function pushOut(from: Map<string, MemoryRecord>, keep: string, time: number, within: () => boolean): void {
    for (const [oldKey, old] of from) {
      if (within()) return
      if (oldKey !== keep && (old.owner === undefined || old.expiresAt <= time)) drop(oldKey, old)
    }
  }

  /**
   * Drops up to `max` ended records, from the oldest of each route on: a route's records share
   * its TTL, so its oldest end first, while routes' TTLs differ (one route's long-lived record
   * must not keep another's ended ones). A claim under way at a route's head holds it up only
   * while it runs.
   */
  function sweep(max: number): void {
    const time = now()
    let budget = max
    for (const group of groups.values()) {
      for (const [key, record] of group.records) {
        if (record.expiresAt > time) break
        drop(key, record)
        if (--budget === 0) return
      }
    }
  }

  function shown(record: MemoryRecord): IdempotencyRecord {
    return record.owner !== undefined ? { state: 'running', fingerprint: record.fingerprint } : { state: 'done', fingerprint: record.fingerprint, answer: record.answer }
  }

  return {
    claim(key, fingerprint, leaseMs, bounds) {
      sweep(SWEEP_PER_CLAIM)
      const found = live(key)
      if (found !== undefined) return { claimed: false, record: shown(found) }
      const owner = `m${++owners}`
      put(key, { group: boundsKey(bounds), fingerprint, owner, answer: null, expiresAt: now() + leaseMs, bytes: RECORD_OVERHEAD_BYTES }, bounds)
      return { claimed: true, owner }
    },
    renew(key, owner, leaseMs) {
      const record = live(key)
      if (record?.owner !== owner) return false
      record.expiresAt = now() + leaseMs
      return true
    },
    complete(key, owner, answer, ttlMs, bounds) {
      const record = live(key)
      if (record?.owner !== owner) return false
      put(key, { group: boundsKey(bounds), fingerprint: record.fingerprint, owner: undefined, answer, expiresAt: now() + ttlMs, bytes: RECORD_OVERHEAD_BYTES + (answer?.body.length ?? 0) }, bounds)
      waiters.wake(key)
      return true
    },
    release(key, owner) {
      const record = records.get(key)
      if (record?.owner === owner) drop(key, record)
      waiters.wake(key)
    },
    changed(key, waitMs, scope) {
      return waiters.wait(key, waitMs, scope)
    },
    sweep,
    peek(key) {
      // Not `live`: a read-only look drops nothing.
      const record = records.get(key)
      return record !== undefined && record.expiresAt > now() ? shown(record) : undefined
    },
    get size() {
      return records.size
    }
  }
}
