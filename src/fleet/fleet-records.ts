import type { StoreLogger } from '../store/redis-connection.js'
import type { SharedStore } from '../store/shared-store.js'

/** SPEC 12's scope of a change or an answer. */
export type FleetScope = 'fleet' | 'local' | 'replica'

/** What a record must carry: when it ends. */
export interface ExpiringRecord {
  readonly until: string
}

/**
 * One record as replicas exchange it: its value, or null once removed (a tombstone, kept until
 * the record would have ended so that a replica holding the old copy does not write it back),
 * and when it was written (its writer's clock; the later write wins).
 */
interface Versioned<T> {
  v: T | null
  at: number
  until: number
}

/**
 * Writes KEYS[1][ARGV[1]] = ARGV[2] unless the field already holds a write at least as recent
 * (ARGV[3], its `at`): "written to the store when it answers (unless the store holds a later
 * one)" (SPEC 14), one step, so that two replicas writing back at once keep the later.
 */
const WRITE_IF_LATER = `local current = redis.call('HGET', KEYS[1], ARGV[1])
if current then
  local ok, decoded = pcall(cjson.decode, current)
  if ok and type(decoded) == 'table' and tonumber(decoded.at) ~= nil and tonumber(decoded.at) >= tonumber(ARGV[3]) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1`

/**
 * Deletes KEYS[1]'s fields ARGV[1], ARGV[3], … each only while it still holds the value read
 * (ARGV[2], ARGV[4], …): a record another replica wrote since the read is not an ended one.
 */
const DELETE_IF_UNCHANGED = `for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 1`

export interface FleetRecordsOptions {
  store: SharedStore
  /** The key family below `store.keyPrefix` (SPEC 12: each feature its own). */
  family: string
  logger: StoreLogger
  /** How often the local copy is refreshed from the store; default 1 s (SPEC 12). */
  refreshMs?: number
}

/**
 * State every replica shares and no request waits for (SPEC 12, 13, 14: brownout pauses, stage
 * overrides): a local copy answers every read, and is refreshed from one Redis hash every second.
 * A change is written through at once when the store answers; while it does not, it holds on
 * this replica (`scope: "local"`) and is written back when the store answers again, unless the
 * store by then holds a later one. A store that answers but has lost the hash (flushed,
 * restarted without persistence) gets each replica's copy written back at the next refresh.
 * Removal writes a tombstone that lives until the record would have ended, so that no replica's
 * older copy brings it back. With `store: memory` the records are this process's.
 */
export class FleetRecords<T extends ExpiringRecord> {
  readonly #store: SharedStore
  readonly #hashKey: string
  readonly #logger: StoreLogger
  readonly #family: string
  readonly #refreshMs: number
  readonly #local = new Map<string, Versioned<T>>()
  #timer: NodeJS.Timeout | undefined
  #stopped = false
  #refreshing: Promise<boolean> | undefined
  #lastWrite = 0

  constructor(options: FleetRecordsOptions) {
    this.#store = options.store
    this.#family = options.family
    this.#hashKey = `${options.store.keyPrefix}f:${options.family}`
    this.#logger = options.logger
    this.#refreshMs = options.refreshMs ?? 1_000
  }

  /** Records held here, tombstones included: 0 lets a caller on the request path skip the lookup. */
  get size(): number {
    return this.#local.size
  }

  /** The scope a change made now would have. */
  scope(): FleetScope {
    if (this.#store.connection === undefined) return 'replica'
    return this.#store.isUp() ? 'fleet' : 'local'
  }

  /** The record under `key` in force at `nowMs` (the local copy: no I/O). */
  get(key: string, nowMs: number): T | undefined {
    const record = this.#local.get(key)
    return record !== undefined && record.v !== null && record.until > nowMs ? record.v : undefined
  }

  /** Every record in force at `nowMs`, by key. */
  entries(nowMs: number): Array<[string, T]> {
    const listed: Array<[string, T]> = []
    // Without a store no refresh drops what has ended: a listing does (the gauges list every
    // scrape), so that `size` comes back to 0 and the request path skips its lookups again.
    const prune = this.#store.connection === undefined
    for (const [key, record] of this.#local) {
      if (record.v !== null && record.until > nowMs) listed.push([key, record.v])
      else if (prune && record.until <= nowMs) this.#local.delete(key)
    }
    return listed
  }

  /**
   * Sets a record here at once and, when the store answers, on every replica; says which. Read
   * from the store first, as a removal is, so that the change is later than any record in force.
   */
  async set(key: string, value: T): Promise<FleetScope> {
    // Without a store that answers, a change applies here before its first await.
    if (this.scope() === 'fleet') await this.current()
    return this.#change(key, { v: value, at: this.#nextWriteAt(key), until: Date.parse(value.until) })
  }

  /**
   * Removes a record (here at once); the removed value, if one was in force. Read from the store
   * first when it answers: the local copy may be up to a refresh old, and a record another
   * replica set since then would otherwise be missed here, and stay on every replica.
   */
  async remove(key: string, nowMs: number): Promise<{ removed: T | undefined; scope: FleetScope }> {
    if (this.scope() === 'fleet') await this.current()
    const removed = this.get(key, nowMs)
    if (removed === undefined) return { removed, scope: this.scope() }
    const scope = await this.#change(key, { v: null, at: this.#nextWriteAt(key), until: Date.parse(removed.until) })
    return { removed, scope }
  }

  /** Brings the local copy up to the store's state as of now (a refresh begun earlier may predate a change). */
  async current(): Promise<void> {
    await this.#refreshing
    await this.refresh()
  }

  /**
   * Starts the refresh loop; the first refresh is awaited (bounded by the store's command
   * timeout). True when the fleet's records were read (always, without a store).
   */
  async start(): Promise<boolean> {
    if (this.#store.connection === undefined) return true
    // Back from an outage: changes made meanwhile go out now rather than at the next tick.
    this.#store.onChange((up) => {
      if (up && !this.#stopped) void this.refresh()
    })
    const read = await this.refresh()
    this.#schedule()
    return read
  }

  stop(): void {
    this.#stopped = true
    clearTimeout(this.#timer)
  }

  /**
   * One exchange with the store: adopt what others wrote later than this copy, write back what
   * the store lacks or holds older (changes made while it was away, or a store that lost them),
   * and drop what has ended, here and there. True when the store's records were read.
   */
  refresh(): Promise<boolean> {
    this.#refreshing ??= this.#exchange().finally(() => {
      this.#refreshing = undefined
    })
    return this.#refreshing
  }

  async #exchange(): Promise<boolean> {
    const connection = this.#store.connection
    if (connection === undefined || !this.#store.isUp()) return false
    const nowMs = Date.now()
    let stored: Record<string, string>
    try {
      stored = await connection.run((client) => client.hgetall(this.#hashKey))
    } catch {
      return false
    }
    const ended: string[] = []
    for (const [key, raw] of Object.entries(stored)) {
      const remote = parseVersioned<T>(raw)
      if (remote === undefined || remote.until <= nowMs) {
        ended.push(key, raw)
        continue
      }
      const mine = this.#local.get(key)
      if (mine === undefined || remote.at > mine.at) {
        this.#local.set(key, remote)
      }
    }
    const writes: Array<[string, Versioned<T>]> = []
    for (const [key, mine] of this.#local) {
      if (mine.until <= nowMs) {
        this.#local.delete(key)
        continue
      }
      const remote = stored[key] === undefined ? undefined : parseVersioned<T>(stored[key])
      if (remote === undefined || mine.at > remote.at) writes.push([key, mine])
    }
    try {
      if (ended.length > 0) await connection.run((client) => client.eval(DELETE_IF_UNCHANGED, 1, this.#hashKey, ...ended))
      for (const [key, record] of writes) await this.#write(key, record)
    } catch {
      // The store went away mid-exchange: what was not written is written at the next one.
    }
    return true
  }

  async #change(key: string, record: Versioned<T>): Promise<FleetScope> {
    if (this.#store.connection === undefined) {
      // No other replica holds an older copy: a removal needs no tombstone.
      if (record.v === null) this.#local.delete(key)
      else this.#local.set(key, record)
      return 'replica'
    }
    this.#local.set(key, record)
    // While the store is away the change holds here; the refresh after it answers writes it.
    if (!this.#store.isUp()) return 'local'
    try {
      // Refused when the store holds a later write of another replica: that one is in force
      // everywhere, this copy too from now on.
      if (!(await this.#write(key, record))) await this.current()
      return 'fleet'
    } catch (error) {
      this.#logger.warn({ store: 'redis', family: this.#family, reason: error instanceof Error ? error.message : String(error) }, 'a shared change holds on this replica until the store answers')
      return 'local'
    }
  }

  /** True when the store took the write, false when it holds a later one. */
  async #write(key: string, record: Versioned<T>): Promise<boolean> {
    const connection = this.#store.connection
    if (connection === undefined) return true
    return (await connection.run((client) => client.eval(WRITE_IF_LATER, 1, this.#hashKey, key, JSON.stringify(record), String(record.at)))) === 1
  }

  /**
   * A change's write time: strictly after this replica's last and after the write it replaces,
   * so that a change is later than the record it was decided on even when that record's writer
   * runs a clock ahead of this one (SPEC 12 tolerates a second of skew before warning).
   */
  #nextWriteAt(key: string): number {
    // This replica's own sequence follows its own clock: another replica's clock ahead moves only
    // the key it wrote, not every later change made here.
    this.#lastWrite = Math.max(Date.now(), this.#lastWrite + 1)
    return Math.max(this.#lastWrite, (this.#local.get(key)?.at ?? 0) + 1)
  }

  #schedule(): void {
    if (this.#stopped) return
    this.#timer = setTimeout(() => {
      this.refresh().finally(() => this.#schedule())
    }, this.#refreshMs)
    this.#timer.unref()
  }
}

function parseVersioned<T>(raw: string | undefined): Versioned<T> | undefined {
  if (raw === undefined) return undefined
  try {
    const parsed = JSON.parse(raw) as Partial<Versioned<T>>
    if (typeof parsed.at !== 'number' || typeof parsed.until !== 'number' || parsed.v === undefined) return undefined
    return parsed as Versioned<T>
  } catch {
    return undefined
  }
}
