import { randomBytes } from 'node:crypto'
import { isReplyError, type RedisConnection } from '../store/redis-connection.js'
import { pendingDeletes } from '../store/pending-deletes.js'
import type { SharedStore } from '../store/shared-store.js'
import { createMemoryIdempotencyStore, SWEEP_PER_CLAIM, type ClaimResult, type IdempotencyRecord, type IdempotencyStore, type RecordBounds, type StoredAnswer } from './idempotency-store.js'
import { KeyWaiters } from './key-waiters.js'

/**
 * SPEC 16's records on SPEC 12's shared store, so that replicas share them. One Redis string per
 * record, in its own family below the prefix (docs/scaling.md):
 *
 *   <prefix>i:<record key>   c:<owner>:<fingerprint>                      PX lease   (a claim under way)
 *                            d:<fingerprint>:<meta JSON>\n<answer body>  PX ttlMs   (the kept answer)
 *
 * The record key is already a SHA-256 of (tenant, the credential's SHA-256, route, key), the
 * fingerprint a SHA-256 and the owner random: no raw key, token or request body reaches Redis.
 * The claim and the answer are one key: `complete` replaces the claim by the answer in one Lua
 * step, only while it still holds this owner's claim, so no moment has neither. A claim left by a
 * replica that died ends with its PX; a running one is renewed with a compare-and-PEXPIRE.
 */

/** `SET NX PX`, or the record that holds the key, in one step (a waiter's poll is the same call). */
const CLAIM = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return false end
return redis.call('GET', KEYS[1])`
/** Extends the claim only while it is still ARGV[1] (a lapsed lease may be another replica's now). */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`
/** Replaces the claim ARGV[1] by the answer ARGV[2] for ARGV[3] ms; nothing when the claim is no longer ours. */
const COMPLETE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end
return 0`
/** Deletes the claim ARGV[1] only (an answer not kept, SPEC 16), so that a retry runs. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`

interface IdempotencyCommands {
  v4gwIdempotencyClaimBuffer(key: string, claim: string, leaseMs: number): Promise<Buffer | null>
  v4gwIdempotencyRenew(key: string, claim: string, leaseMs: number): Promise<number>
  v4gwIdempotencyComplete(key: string, claim: string, record: Buffer, ttlMs: number): Promise<number>
  v4gwIdempotencyRelease(key: string, claim: string): Promise<number>
}

/** The client a command is given (only src/store/ names ioredis). */
type RedisClient = Parameters<Parameters<RedisConnection['run']>[0]>[0]

const withScripts = new WeakSet<RedisClient>()

/** The scripts as ioredis commands (EVALSHA, EVAL on NOSCRIPT): a claim sends the hash, not the script. */
function scripts(client: RedisClient): IdempotencyCommands {
  if (!withScripts.has(client)) {
    client.defineCommand('v4gwIdempotencyClaim', { numberOfKeys: 1, lua: CLAIM })
    client.defineCommand('v4gwIdempotencyRenew', { numberOfKeys: 1, lua: RENEW })
    client.defineCommand('v4gwIdempotencyComplete', { numberOfKeys: 1, lua: COMPLETE })
    client.defineCommand('v4gwIdempotencyRelease', { numberOfKeys: 1, lua: RELEASE })
    withScripts.add(client)
  }
  return client as unknown as IdempotencyCommands
}

/** The family below `keyPrefix` (SPEC 12: none reuses `s:`, `l:`, `f:`). */
export const IDEMPOTENCY_FAMILY = 'i:'
const CLAIM_TAG = 'c:'
const DONE_TAG = 'd:'

/** How a kept answer's status and headers ride before its body: `b: false` is an answer too large to keep. */
interface AnswerMeta {
  s?: number
  t?: string
  i?: string
  /** Made by the gateway (StoredAnswer.madeByGateway); absent otherwise. */
  g?: 1
  b: boolean
}

export function encodeRecord(fingerprint: string, answer: StoredAnswer | null): Buffer {
  const meta: AnswerMeta = answer === null ? { b: false } : { s: answer.statusCode, b: true }
  if (answer?.contentType !== undefined) meta.t = answer.contentType
  if (answer?.sessionId !== undefined) meta.i = answer.sessionId
  if (answer?.madeByGateway === true) meta.g = 1
  // JSON.stringify escapes every newline inside a string, so the first '\n' ends the meta.
  const head = Buffer.from(`${DONE_TAG}${fingerprint}:${JSON.stringify(meta)}\n`)
  return answer === null ? head : Buffer.concat([head, answer.body])
}

/** A record as Redis holds it; undefined for a value this gateway did not write. */
export function decodeRecord(value: Buffer): IdempotencyRecord | undefined {
  const tag = value.subarray(0, 2).toString('latin1')
  if (tag === CLAIM_TAG) {
    const text = value.toString('latin1')
    const end = text.indexOf(':', CLAIM_TAG.length)
    return end === -1 ? undefined : { state: 'running', fingerprint: text.slice(end + 1) }
  }
  if (tag !== DONE_TAG) return undefined
  const metaStart = value.indexOf(':', DONE_TAG.length)
  const bodyStart = value.indexOf('\n', metaStart)
  if (metaStart === -1 || bodyStart === -1) return undefined
  const fingerprint = value.subarray(DONE_TAG.length, metaStart).toString('latin1')
  let meta: AnswerMeta
  try {
    meta = JSON.parse(value.subarray(metaStart + 1, bodyStart).toString('utf8')) as AnswerMeta
  } catch {
    return undefined
  }
  if (!meta.b || typeof meta.s !== 'number') return { state: 'done', fingerprint, answer: null }
  // A copy: the reply's buffer is not kept alive by a record that lives longer than the reply.
  const answer: StoredAnswer = { statusCode: meta.s, body: Buffer.from(value.subarray(bodyStart + 1)), contentType: meta.t, sessionId: meta.i, ...(meta.g === 1 ? { madeByGateway: true } : {}) }
  return { state: 'done', fingerprint, answer }
}

export interface SharedIdempotencyOptions {
  /** How often a waiter looks at a record another replica holds; default 25 ms (as the start lock). */
  pollMs?: number
}

const DEFAULT_POLL_MS = 25

/**
 * SPEC 16's records on the shared store, with this replica's bounded memory records standing in
 * while the store does not answer (SPEC 16 "Store down": counted as `store_unavailable`, never
 * written to the store later). With `store: memory` these are the memory records alone.
 *
 * A claim's owner says where it was made (`c:…` in Redis, `m…` in memory), so that its renewal
 * and its answer go to the same place even if the store comes or goes meanwhile. A record made in
 * memory during an outage still answers on this replica once the store is back: its execution
 * ran here, and a retry that reaches this replica must not run it again.
 */
export function createSharedIdempotencyStore(shared: SharedStore, options: SharedIdempotencyOptions = {}): IdempotencyStore {
  const memory = createMemoryIdempotencyStore()
  const connection = shared.connection
  if (connection === undefined) return memory
  const pollMs = options.pollMs ?? DEFAULT_POLL_MS
  const waiters = new KeyWaiters()
  const redisKey = (key: string): string => `${shared.keyPrefix}${IDEMPOTENCY_FAMILY}${key}`

  function inMemory(result: ClaimResult): ClaimResult {
    return { ...result, unavailable: true }
  }

  function fingerprintOf(claim: string): string {
    return claim.slice(claim.indexOf(':', CLAIM_TAG.length) + 1)
  }

  /** Claims given up on, and releases the store did not take: deleted if still ours (store/pending-deletes.ts). */
  const deleteLater = pendingDeletes(connection, (name, claim) => connection.run((client) => scripts(client).v4gwIdempotencyRelease(name, claim)))
  /**
   * This replica's claims in Redis whose requests still run (key → owner). While the store is
   * down, a duplicate that reaches this replica waits for the one running here rather than run
   * it again from memory, which knows nothing of it.
   */
  const runningHere = new Map<string, string>()
  const endedHere = (key: string, owner: string): void => {
    if (runningHere.get(key) === owner) runningHere.delete(key)
  }
  /** A claim the store cannot take: a wait for the request this replica runs under the key, else this replica's memory. */
  const claimWhileAway = (key: string, fingerprint: string, leaseMs: number, bounds: RecordBounds): ClaimResult => {
    const running = runningHere.get(key)
    if (running !== undefined) return inMemory({ claimed: false, record: { state: 'running', fingerprint: fingerprintOf(running) } })
    return inMemory(memory.claim(key, fingerprint, leaseMs, bounds))
  }

  return {
    async claim(key, fingerprint, leaseMs, bounds, waitingOnRunning) {
      // A record made here during an outage answers first (its execution ran on this replica);
      // those that have ended go a few at a time (the memory store's own claims, which also sweep,
      // are not made while the store answers), so the outage's records do not stay for good.
      if (memory.size > 0) {
        if (connection.isUp()) memory.sweep(SWEEP_PER_CLAIM)
        const local = memory.peek(key)
        if (local !== undefined) return connection.isUp() ? { claimed: false, record: local } : { claimed: false, record: local, unavailable: true }
      }
      // No request waits on a store that is down (SPEC 12), except on one this replica runs.
      if (!connection.isUp()) return claimWhileAway(key, fingerprint, leaseMs, bounds)
      const claim = `${CLAIM_TAG}${randomBytes(16).toString('hex')}:${fingerprint}`
      const name = redisKey(key)
      let found: Buffer | null
      try {
        found = await connection.run((client) => scripts(client).v4gwIdempotencyClaimBuffer(name, claim, leaseMs))
      } catch (error) {
        // A claim given up on that the store may still apply would answer every replica 409 for its
        // lease. One the server refused with an error reply was not applied: nothing to delete
        // (a waiter's looks through a refusing store would otherwise fill the pending deletes).
        if (!isReplyError(error)) deleteLater(name, claim)
        // A duplicate that saw the first request running a moment ago keeps waiting for it while
        // the store still counts as up (a fork, a slow command): running it here too would make
        // two executions of one key across replicas (SPEC 16) for one stalled look.
        if (waitingOnRunning === true && connection.isUp()) return { claimed: false, record: { state: 'running', fingerprint } }
        // A store that hangs fails the commands in flight before it is found down: the same rule.
        return claimWhileAway(key, fingerprint, leaseMs, bounds)
      }
      if (found === null) {
        runningHere.set(key, claim)
        return { claimed: true, owner: claim }
      }
      const record = decodeRecord(found)
      // Not a record of ours (written by something else under our prefix): never overwritten, never replayed.
      if (record === undefined) return inMemory(memory.claim(key, fingerprint, leaseMs, bounds))
      return { claimed: false, record }
    },
    async renew(key, owner, leaseMs) {
      if (!owner.startsWith(CLAIM_TAG)) return memory.renew(key, owner, leaseMs)
      try {
        return (await connection.run((client) => scripts(client).v4gwIdempotencyRenew(redisKey(key), owner, leaseMs))) === 1
      } catch {
        // Renewed at the next third of the lease, if the store answers by then.
        return true
      }
    },
    async complete(key, owner, answer, ttlMs, bounds) {
      if (!owner.startsWith(CLAIM_TAG)) {
        const kept = memory.complete(key, owner, answer, ttlMs, bounds)
        waiters.wake(key)
        return kept
      }
      try {
        const written = await connection.run((client) => scripts(client).v4gwIdempotencyComplete(redisKey(key), owner, encodeRecord(fingerprintOf(owner), answer), ttlMs))
        endedHere(key, owner)
        waiters.wake(key)
        return written === 1
      } catch {
        // The store went away while the request ran: this replica keeps the answer in its own
        // memory, so a retry that reaches it replays; the claim in Redis ends with its lease.
        const local = memory.claim(key, fingerprintOf(owner), ttlMs, bounds)
        const kept = local.claimed && memory.complete(key, local.owner, answer, ttlMs, bounds)
        endedHere(key, owner)
        waiters.wake(key)
        return kept ? 'local' : false
      }
    },
    async release(key, owner) {
      if (!owner.startsWith(CLAIM_TAG)) memory.release(key, owner)
      else {
        endedHere(key, owner)
        const name = redisKey(key)
        await connection.run((client) => scripts(client).v4gwIdempotencyRelease(name, owner)).catch(() => {
          // Left, it would answer the retry SPEC 16 lets run 409 until its lease ends.
          deleteLater(name, owner)
        })
      }
      waiters.wake(key)
    },
    changed(key, waitMs, scope) {
      // Another replica's answer is seen by looking again; this replica's wakes the waiter at once.
      return waiters.wait(key, Math.min(waitMs, pollMs), scope)
    },
    async peek(key) {
      const local = memory.size > 0 ? memory.peek(key) : undefined
      if (local !== undefined) return local
      if (!connection.isUp()) throw new Error('the shared store does not answer')
      const found = await connection.run((client) => client.getBuffer(redisKey(key)))
      return found === null ? undefined : decodeRecord(found)
    },
    get size() {
      return memory.size
    }
  }
}

