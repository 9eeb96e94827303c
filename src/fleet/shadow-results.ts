import type { StoreLogger } from '../store/redis-connection.js'
import type { SharedStore } from '../store/shared-store.js'
import type { FleetScope } from './fleet-records.js'

/** SPEC 15's outcomes of a shadow comparison, a closed set (also the metric's `outcome`). */
export const SHADOW_OUTCOMES = ['match', 'mismatch', 'candidate_error', 'primary_error', 'dropped', 'skipped', 'abandoned'] as const
export type ShadowOutcome = (typeof SHADOW_OUTCOMES)[number]

/** One comparison's result as the results keep it: statuses and recorded pointers, never a body. */
export interface ShadowRecord {
  readonly tenant: string
  readonly route: string
  readonly outcome: ShadowOutcome
  readonly requestId: string
  readonly atMs: number
  /** The legacy answer's status; undefined without one. */
  readonly primaryStatus?: number | undefined
  /** The candidate's status; undefined without one. */
  readonly candidateStatus?: number | undefined
  /** Recorded pointers (util/shadow-compare.ts) of a mismatch. */
  readonly pointers?: readonly string[] | undefined
}

export interface ShadowSample {
  requestId: string
  at: string
  primaryStatus: number | null
  candidateStatus: number | null
  pointers: string[]
}

export interface ShadowCounts {
  comparisons: number
  matches: number
  mismatches: number
  candidateErrors: number
  primaryErrors: number
  dropped: number
  skipped: number
  abandoned: number
  /** mismatches / (matches + mismatches); null before either. */
  mismatchRate: number | null
}

/** `GET /admin/shadow`'s answer for one route (SPEC 15 "Results"). */
export interface ShadowRouteResult extends ShadowCounts {
  since: string | null
  last24h: ShadowCounts
  topPointers: Array<{ pointer: string; count: number }>
  samples: ShadowSample[]
}

/** SPEC 15: at most this many distinct pointers counted per route; the rest add to `#other`. */
export const MAX_POINTERS_PER_ROUTE = 100
export const OTHER_POINTER = '#other'
const TOP_POINTERS = 20
const MAX_SAMPLES = 20
/** A sample names at most this many pointers: enough to read, bounded whatever an answer holds. */
const MAX_SAMPLE_POINTERS = 20
const HOUR_MS = 3_600_000
/** The last 24 h: the current hour's bucket and the 23 before it. */
const WINDOW_HOURS = 24
/**
 * With Redis, how long one unwritten tally of a route collects before the next one starts: each
 * is written and checked against a reset on its own (WRITE_TALLY), so that of counts made before
 * a reset on another replica, at most this much is written after it while this replica's store
 * was away or its flushes failed for up to an hour (MAX_TALLIES_PER_ROUTE). Flushes
 * (`store.flushMs`, 2 s by default) mostly write a route's tally well before it is this old.
 */
const TALLY_WINDOW_MS = 60_000
/**
 * Unwritten tallies kept per route (an hour of outage, one a minute). Beyond it the two oldest
 * become one, whose span then grows: in a longer outage, a reset made after its first hour may
 * let that merged span's counts through (docs/decisions.md).
 */
const MAX_TALLIES_PER_ROUTE = 60

type Field = 'matches' | 'mismatches' | 'candidateErrors' | 'primaryErrors' | 'dropped' | 'skipped' | 'abandoned'
const FIELDS: readonly Field[] = ['matches', 'mismatches', 'candidateErrors', 'primaryErrors', 'dropped', 'skipped', 'abandoned']
const FIELD_OF: Record<ShadowOutcome, Field> = {
  match: 'matches',
  mismatch: 'mismatches',
  candidate_error: 'candidateErrors',
  primary_error: 'primaryErrors',
  dropped: 'dropped',
  skipped: 'skipped',
  abandoned: 'abandoned'
}

type Tally = Record<Field, number>

function emptyTally(): Tally {
  return { matches: 0, mismatches: 0, candidateErrors: 0, primaryErrors: 0, dropped: 0, skipped: 0, abandoned: 0 }
}

function addTally(into: Tally, from: Partial<Record<Field, number>>): void {
  for (const field of FIELDS) into[field] += from[field] ?? 0
}

/** Counts as the answer shows them: `comparisons` are the requests a comparison was started for (not dropped or skipped). */
function countsOf(tally: Tally): ShadowCounts {
  const compared = tally.matches + tally.mismatches
  return {
    comparisons: compared + tally.candidateErrors + tally.primaryErrors + tally.abandoned,
    ...tally,
    mismatchRate: compared === 0 ? null : tally.mismatches / compared
  }
}

/** The fields of a tally that counted anything: the script adds only those (an empty object stays one in JSON). */
function positiveCounts(counts: Tally): Record<string, number> {
  const positive: Record<string, number> = {}
  for (const field of FIELDS) if (counts[field] > 0) positive[field] = counts[field]
  return positive
}

function hourOf(atMs: number): number {
  return Math.floor(atMs / HOUR_MS) * HOUR_MS
}

/**
 * One route's results in memory, all bounded: 25 hourly buckets at most, 100 distinct pointers
 * and `#other`, 20 samples.
 */
class RouteTally {
  since: number
  /** When the last record counted here was made: a tally wholly before a reset is not written. */
  lastAtMs: number
  readonly total = emptyTally()
  readonly hours = new Map<number, Tally>()
  readonly pointers = new Map<string, number>()
  /** Newest first. */
  samples: ShadowSample[] = []

  constructor(since: number) {
    this.since = since
    this.lastAtMs = since
  }

  add(record: ShadowRecord): void {
    this.lastAtMs = Math.max(this.lastAtMs, record.atMs)
    const field = FIELD_OF[record.outcome]
    this.total[field]++
    const hour = hourOf(record.atMs)
    let bucket = this.hours.get(hour)
    if (bucket === undefined) {
      bucket = emptyTally()
      this.hours.set(hour, bucket)
      for (const old of this.hours.keys()) if (old <= hour - WINDOW_HOURS * HOUR_MS) this.hours.delete(old)
    }
    bucket[field]++
    const counted = record.pointers === undefined ? [] : [...new Set(record.pointers.map((pointer) => countPointer(this.pointers, pointer, 1)))]
    if (record.outcome === 'match' || record.outcome === 'dropped' || record.outcome === 'skipped') return
    this.samples.unshift({
      requestId: record.requestId,
      at: new Date(record.atMs).toISOString(),
      primaryStatus: record.primaryStatus ?? null,
      candidateStatus: record.candidateStatus ?? null,
      pointers: counted.slice(0, MAX_SAMPLE_POINTERS)
    })
    if (this.samples.length > MAX_SAMPLES) this.samples.length = MAX_SAMPLES
  }

  get empty(): boolean {
    return FIELDS.every((field) => this.total[field] === 0)
  }
}

/**
 * Counts `pointer` in `pointers` unless the route already counts 100 others (SPEC 15), then as
 * `#other`; the pointer it was counted as.
 */
function countPointer(pointers: Map<string, number>, pointer: string, count: number): string {
  const distinct = pointers.size - (pointers.has(OTHER_POINTER) ? 1 : 0)
  const as = pointer === OTHER_POINTER || pointers.has(pointer) || distinct < MAX_POINTERS_PER_ROUTE ? pointer : OTHER_POINTER
  pointers.set(as, (pointers.get(as) ?? 0) + count)
  return as
}

/** What the answer is built from: one or more tallies (the store's, this replica's unflushed). */
interface RouteView {
  since: number | null
  total: Tally
  hours: Map<number, Tally>
  pointers: Map<string, number>
  samples: ShadowSample[]
}

function resultOf(view: RouteView, nowMs: number): ShadowRouteResult {
  const window = emptyTally()
  const oldest = hourOf(nowMs) - (WINDOW_HOURS - 1) * HOUR_MS
  for (const [hour, tally] of view.hours) if (hour >= oldest) addTally(window, tally)
  const topPointers = [...view.pointers]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, TOP_POINTERS)
    .map(([pointer, count]) => ({ pointer, count }))
  return {
    since: view.since === null ? null : new Date(view.since).toISOString(),
    ...countsOf(view.total),
    last24h: countsOf(window),
    topPointers,
    samples: [...view.samples].sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0)).slice(0, MAX_SAMPLES)
  }
}

function mergeInto(view: RouteView, tally: RouteTally): void {
  addTally(view.total, tally.total)
  for (const [hour, counts] of tally.hours) {
    const bucket = view.hours.get(hour) ?? emptyTally()
    addTally(bucket, counts)
    view.hours.set(hour, bucket)
  }
  for (const [pointer, count] of tally.pointers) countPointer(view.pointers, pointer, count)
  view.samples.push(...tally.samples)
}

/**
 * One route's tally written in one step (a script runs whole, nothing between its commands):
 * skipped when a reset (DELETE /admin/shadow, on any replica) set the route's `since` after the
 * tally's last record, else its counts, hourly buckets, pointers and samples added. Read and
 * written apart, a reset that landed between the two had counts made before it written after it.
 * A pointer the route's hash lacks counts as itself while the route has fewer than the limit,
 * else as `#other` (SPEC 15).
 *
 * KEYS: the counts hash, the pointers hash, the samples list, then the hourly hashes. ARGV: the
 * tally's last record time; the counts as JSON ({t: totals, h: per hourly key in KEYS order},
 * field names and numbers only); the pointer limit; the samples kept; the hourly TTL; the number
 * of pointers, then each pointer and its count; then the samples, oldest first. Pointers and
 * samples go as plain arguments, not through cjson, which refuses a lone surrogate's escape.
 */
const WRITE_TALLY = `local since = tonumber(redis.call('HGET', KEYS[1], 'since'))
if since ~= nil and tonumber(ARGV[1]) < since then return 0 end
local counts = cjson.decode(ARGV[2])
for field, count in pairs(counts.t) do redis.call('HINCRBY', KEYS[1], field, count) end
for i, hour in ipairs(counts.h) do
  for field, count in pairs(hour) do redis.call('HINCRBY', KEYS[3 + i], field, count) end
  redis.call('EXPIRE', KEYS[3 + i], ARGV[5])
end
local limit = tonumber(ARGV[3])
local pointers = tonumber(ARGV[6])
local distinct = redis.call('HLEN', KEYS[2]) - redis.call('HEXISTS', KEYS[2], '${OTHER_POINTER}')
for i = 7, 6 + 2 * pointers, 2 do
  local pointer = ARGV[i]
  local count = tonumber(ARGV[i + 1])
  if pointer == '${OTHER_POINTER}' or redis.call('HEXISTS', KEYS[2], pointer) == 1 then
    redis.call('HINCRBY', KEYS[2], pointer, count)
  elseif distinct < limit then
    redis.call('HINCRBY', KEYS[2], pointer, count)
    distinct = distinct + 1
  else
    redis.call('HINCRBY', KEYS[2], '${OTHER_POINTER}', count)
  end
end
local firstSample = 7 + 2 * pointers
if #ARGV >= firstSample then
  for i = firstSample, #ARGV do redis.call('LPUSH', KEYS[3], ARGV[i]) end
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[4]) - 1)
end
return 1`

/** An hourly bucket lives past the window, then Redis's own expiry removes it (SPEC 12: TTLs are Redis's). */
const HOUR_TTL_SECONDS = (WINDOW_HOURS + 1) * 3_600

export interface ShadowResultsOptions {
  store: SharedStore
  logger: StoreLogger
  /** `store.flushMs`: at most one write to the store this often (SPEC 12). */
  flushMs: number
  /** Hears every outcome as it is recorded: the metrics. */
  onOutcome?: (tenant: string, route: string, outcome: ShadowOutcome, record: ShadowRecord) => void
  /** The process's start, the `since` of a `replica` answer; default now. */
  startedAtMs?: number
}

export interface ShadowAnswer {
  scope: FleetScope
  tenants: Record<string, Record<string, ShadowRouteResult>>
}

/**
 * SPEC 15's results: per tenant and legacy route, counted in memory as comparisons end (no
 * request waits on the store) and, with Redis, added to the fleet's counts in one pipeline at
 * most every `store.flushMs` under the key family `<keyPrefix>sh:`. An answer then reads the
 * store and adds what this replica has not written yet. While the store is away, what is counted
 * waits here (bounded) and is added when it answers; the answer meanwhile is this replica's,
 * `scope: "local"`, since the outage began. With `store: memory` every answer is this process's
 * (`scope: "replica"`).
 */
export class ShadowResults {
  readonly #store: SharedStore
  readonly #logger: StoreLogger
  readonly #flushMs: number
  readonly #onOutcome: ShadowResultsOptions['onOutcome']
  readonly #prefix: string
  /** With Redis, what has not been written yet (the current window); in memory, everything since the start or a reset. */
  #pending = new Map<string, RouteTally>()
  /** With Redis, earlier windows not written yet (an outage, failed flushes), oldest first. */
  #earlier = new Map<string, RouteTally[]>()
  /** In memory: since when each route's counts hold (the start, or its reset). */
  readonly #startedAtMs: number
  readonly #resetAt = new Map<string, number>()
  #downSinceMs: number | undefined
  #timer: NodeJS.Timeout | undefined
  #flushing: Promise<void> | undefined
  #stopped = false

  constructor(options: ShadowResultsOptions) {
    this.#store = options.store
    this.#logger = options.logger
    this.#flushMs = options.flushMs
    this.#onOutcome = options.onOutcome
    this.#prefix = `${options.store.keyPrefix}sh:`
    this.#startedAtMs = options.startedAtMs ?? Date.now()
    if (options.store.connection !== undefined && !options.store.isUp()) this.#downSinceMs = this.#startedAtMs
  }

  /** Counts one outcome: memory only, never I/O. */
  record(record: ShadowRecord): void {
    this.#onOutcome?.(record.tenant, record.route, record.outcome, record)
    const key = routeKey(record.tenant, record.route)
    let tally = this.#pending.get(key)
    if (tally !== undefined && this.#store.connection !== undefined && record.atMs - tally.since >= TALLY_WINDOW_MS) {
      this.#keepEarlier(key, tally)
      tally = undefined
    }
    if (tally === undefined) {
      tally = new RouteTally(record.atMs)
      this.#pending.set(key, tally)
    }
    tally.add(record)
  }

  scope(): FleetScope {
    if (this.#store.connection === undefined) return 'replica'
    return this.#store.isUp() ? 'fleet' : 'local'
  }

  /** Starts the flush loop with Redis; marks when the fleet's results begin. */
  async start(): Promise<void> {
    const connection = this.#store.connection
    if (connection === undefined) return
    this.#store.onChange((up) => {
      if (!up) this.#downSinceMs ??= Date.now()
      else if (!this.#stopped) void this.flush().then(() => this.#markSince())
    })
    await this.#markSince()
    this.#schedule()
  }

  /** Stops the loop; what is still unwritten is written once more when the store answers. */
  async stop(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#timer)
    // A write under way took only what was recorded before it: what came after goes now.
    await this.#flushing?.catch(() => undefined)
    await this.flush().catch(() => undefined)
  }

  /** Writes what this replica counted since the last flush, in one pipeline. */
  flush(): Promise<void> {
    this.#flushing ??= this.#write().finally(() => {
      this.#flushing = undefined
    })
    return this.#flushing
  }

  /**
   * The results of `routes` (tenant → legacy route labels, every one listed, zeros when unused):
   * the fleet's with Redis answering, else this replica's.
   */
  async answer(routes: ReadonlyMap<string, readonly string[]>, nowMs: number): Promise<ShadowAnswer> {
    const scope = this.scope()
    const views = new Map<string, RouteView>()
    if (scope === 'fleet') {
      // What this replica has not written, taken in the same turn as the store's read is queued:
      // a flush queued before it is in what the read sees (one connection runs commands in
      // order), one queued after it is still in this copy. Read after the store answered, a
      // flush under way meanwhile was in neither, and its counts went missing from the answer.
      const unwritten = new Map<string, RouteTally[]>()
      for (const [tenant, labels] of routes) for (const route of labels) unwritten.set(routeKey(tenant, route), this.#unwritten(routeKey(tenant, route)))
      try {
        await this.#readStore(routes, views, nowMs)
      } catch (error) {
        this.#logger.warn({ store: 'redis', family: 'shadow', reason: error instanceof Error ? error.message : String(error) }, "shadow results answered from this replica's memory: the store did not answer")
        return this.#answerLocally(routes, 'local', nowMs)
      }
      for (const [key, view] of views) for (const tally of unwritten.get(key) ?? []) mergeInto(view, tally)
      return { scope, tenants: build(routes, views, nowMs) }
    }
    return this.#answerLocally(routes, scope, nowMs)
  }

  /**
   * `DELETE /admin/shadow`: the counts of a tenant's routes (or one route) start again from now.
   * With the store away the answer is `local`: this replica's counts start again, the fleet's do
   * not (carried to the store later, a reset either deletes what other replicas counted after it
   * or drops what this one counted during the outage: docs/decisions.md); the caller resets again
   * once the store answers.
   */
  async reset(tenant: string, routes: readonly string[], nowMs: number): Promise<FleetScope> {
    for (const route of routes) {
      const key = routeKey(tenant, route)
      this.#pending.delete(key)
      this.#earlier.delete(key)
      this.#resetAt.set(key, nowMs)
    }
    const connection = this.#store.connection
    if (connection === undefined) return 'replica'
    if (!this.#store.isUp()) return 'local'
    try {
      await connection.run((client) => {
        // One transaction: no WRITE_TALLY of another replica between a route's DEL and its new
        // `since`, which would see no reset and write counts made before it.
        const transaction = client.multi()
        for (const route of routes) {
          const base = this.#routeBase(tenant, route)
          transaction.del(`${base}:c`, `${base}:p`, `${base}:s`, ...hourKeys(base, nowMs))
          transaction.hset(`${base}:c`, 'since', String(nowMs))
        }
        return transaction.exec()
      })
      return 'fleet'
    } catch {
      return 'local'
    }
  }

  #answerLocally(routes: ReadonlyMap<string, readonly string[]>, scope: FleetScope, nowMs: number): ShadowAnswer {
    const views = new Map<string, RouteView>()
    for (const [tenant, labels] of routes) {
      for (const route of labels) {
        const key = routeKey(tenant, route)
        // Local: since the outage began, or this replica's reset made during it.
        const resetAtMs = this.#resetAt.get(key)
        const since = scope === 'local' ? Math.max(this.#downSinceMs ?? nowMs, resetAtMs ?? 0) : (resetAtMs ?? this.#startedAtMs)
        const view = emptyView(since)
        for (const tally of this.#unwritten(key)) mergeInto(view, tally)
        views.set(key, view)
      }
    }
    return { scope, tenants: build(routes, views, nowMs) }
  }

  async #readStore(routes: ReadonlyMap<string, readonly string[]>, views: Map<string, RouteView>, nowMs: number): Promise<void> {
    const connection = this.#store.connection
    if (connection === undefined) return
    const listed: Array<[string, string]> = []
    for (const [tenant, labels] of routes) for (const route of labels) listed.push([tenant, route])
    const hours = hourStarts(nowMs)
    const replies = await connection.run((client) => {
      const pipeline = client.pipeline()
      pipeline.get(`${this.#prefix}since`)
      for (const [tenant, route] of listed) {
        const base = this.#routeBase(tenant, route)
        pipeline.hgetall(`${base}:c`)
        pipeline.hgetall(`${base}:p`)
        pipeline.lrange(`${base}:s`, 0, MAX_SAMPLES - 1)
        for (const hour of hours) pipeline.hgetall(`${base}:h:${hour}`)
      }
      return pipeline.exec()
    })
    if (replies === null) throw new Error('the pipeline was not run')
    const value = (index: number): unknown => {
      const [error, result] = replies[index] as [Error | null, unknown]
      if (error !== null) throw error
      return result
    }
    const familySince = Number(value(0) ?? Number.NaN)
    let index = 1
    for (const [tenant, route] of listed) {
      const counts = value(index++) as Record<string, string>
      const pointers = value(index++) as Record<string, string>
      const samples = value(index++) as string[]
      const ownSince = Number(counts.since ?? Number.NaN)
      const since = Number.isFinite(ownSince) ? ownSince : Number.isFinite(familySince) ? familySince : null
      const view = emptyView(since)
      addTally(view.total, numbers(counts))
      for (const [pointer, count] of Object.entries(pointers)) countPointer(view.pointers, pointer, Number(count))
      for (const text of samples) {
        const sample = parseSample(text)
        if (sample !== undefined) view.samples.push(sample)
      }
      for (const hour of hours) {
        const bucket = numbers(value(index++) as Record<string, string>)
        if (FIELDS.some((field) => (bucket[field] ?? 0) > 0)) {
          const tally = emptyTally()
          addTally(tally, bucket)
          view.hours.set(hour, tally)
        }
      }
      views.set(routeKey(tenant, route), view)
    }
  }

  async #write(): Promise<void> {
    const connection = this.#store.connection
    if (connection === undefined || !this.#store.isUp() || (this.#pending.size === 0 && this.#earlier.size === 0)) return
    const batch: Array<[string, RouteTally]> = []
    for (const [key, tallies] of this.#earlier) for (const tally of tallies) batch.push([key, tally])
    batch.push(...this.#pending)
    this.#pending = new Map()
    this.#earlier = new Map()
    try {
      // A reset on another replica (DELETE /admin/shadow) names its instant: counts made wholly
      // before it are not written after it (one tally that straddles it may be, at most
      // TALLY_WINDOW_MS of them). The check and the write are one script per tally (WRITE_TALLY),
      // so no reset lands between them.
      const written = batch.filter(([, tally]) => !tally.empty)
      const results = await connection.run((client) => {
        const pipeline = client.pipeline()
        for (const [key, tally] of written) {
          const [tenant, route] = splitRouteKey(key)
          const base = this.#routeBase(tenant, route)
          const hours = [...tally.hours]
          const counts = JSON.stringify({ t: positiveCounts(tally.total), h: hours.map(([, bucket]) => positiveCounts(bucket)) })
          pipeline.eval(
            WRITE_TALLY,
            3 + hours.length,
            `${base}:c`,
            `${base}:p`,
            `${base}:s`,
            ...hours.map(([hour]) => `${base}:h:${hour}`),
            String(tally.lastAtMs),
            counts,
            String(MAX_POINTERS_PER_ROUTE),
            String(MAX_SAMPLES),
            String(HOUR_TTL_SECONDS),
            String(tally.pointers.size),
            ...[...tally.pointers].flatMap(([pointer, count]) => [pointer, String(count)]),
            // Oldest first, so that the newest ends at the head of the list.
            ...[...tally.samples].reverse().map((sample) => JSON.stringify(sample))
          )
        }
        return pipeline.exec()
      })
      // A script the server refused (a pipeline reports each command's error, it throws none):
      // that route's tally is counted again at the next flush.
      for (const [index, [key, tally]] of written.entries()) if (results?.[index]?.[0] != null) this.#keepEarlier(key, tally)
      this.#downSinceMs = undefined
    } catch {
      // Not written: kept apart from what comes meanwhile, and written at the next flush.
      for (const [key, tally] of batch) this.#keepEarlier(key, tally)
    }
  }

  /**
   * A route's tally waiting to be written behind its later ones: a window that closed, or one
   * not written (kept apart from what comes meanwhile, and written at the next flush).
   */
  #keepEarlier(key: string, tally: RouteTally): void {
    const tallies = this.#earlier.get(key)
    if (tallies === undefined) {
      this.#earlier.set(key, [tally])
      return
    }
    tallies.push(tally)
    if (tallies.length > MAX_TALLIES_PER_ROUTE) tallies.splice(0, 2, combine(tallies[0] as RouteTally, tallies[1] as RouteTally))
  }

  /** What this replica counted for a route and has not written, oldest first. */
  #unwritten(key: string): RouteTally[] {
    const current = this.#pending.get(key)
    const earlier = this.#earlier.get(key) ?? []
    return current === undefined ? earlier : [...earlier, current]
  }

  async #markSince(): Promise<void> {
    const connection = this.#store.connection
    if (connection === undefined || !this.#store.isUp()) return
    await connection.run((client) => client.set(`${this.#prefix}since`, String(Date.now()), 'NX')).catch(() => undefined)
  }

  #routeBase(tenant: string, route: string): string {
    return `${this.#prefix}${encodeURIComponent(tenant)}:${encodeURIComponent(route)}`
  }

  #schedule(): void {
    if (this.#stopped) return
    this.#timer = setTimeout(() => {
      this.flush().finally(() => this.#schedule())
    }, this.#flushMs)
    this.#timer.unref()
  }
}

function emptyView(since: number | null): RouteView {
  return { since, total: emptyTally(), hours: new Map(), pointers: new Map(), samples: [] }
}

function build(routes: ReadonlyMap<string, readonly string[]>, views: Map<string, RouteView>, nowMs: number): Record<string, Record<string, ShadowRouteResult>> {
  const tenants: Record<string, Record<string, ShadowRouteResult>> = {}
  for (const [tenant, labels] of routes) {
    const results: Record<string, ShadowRouteResult> = {}
    for (const route of labels) results[route] = resultOf(views.get(routeKey(tenant, route)) ?? emptyView(null), nowMs)
    tenants[tenant] = results
  }
  return tenants
}

/** Two unwritten tallies of one route as one (a flush that failed, and what came meanwhile). */
function combine(older: RouteTally, newer: RouteTally): RouteTally {
  const tally = new RouteTally(older.since)
  tally.lastAtMs = Math.max(older.lastAtMs, newer.lastAtMs)
  addTally(tally.total, older.total)
  addTally(tally.total, newer.total)
  for (const source of [older, newer]) {
    for (const [hour, counts] of source.hours) {
      const bucket = tally.hours.get(hour) ?? emptyTally()
      addTally(bucket, counts)
      tally.hours.set(hour, bucket)
    }
    for (const [pointer, count] of source.pointers) countPointer(tally.pointers, pointer, count)
  }
  tally.samples = [...newer.samples, ...older.samples].slice(0, MAX_SAMPLES)
  return tally
}

function routeKey(tenant: string, route: string): string {
  return `${tenant}\u0000${route}`
}

function splitRouteKey(key: string): [string, string] {
  const at = key.indexOf('\u0000')
  return [key.slice(0, at), key.slice(at + 1)]
}

function hourStarts(nowMs: number): number[] {
  const current = hourOf(nowMs)
  return Array.from({ length: WINDOW_HOURS }, (_unused, back) => current - back * HOUR_MS)
}

/** The hourly keys a reset removes: every bucket that may still live. */
function hourKeys(base: string, nowMs: number): string[] {
  const current = hourOf(nowMs)
  return Array.from({ length: WINDOW_HOURS + 2 }, (_unused, back) => `${base}:h:${current - back * HOUR_MS}`)
}

function numbers(hash: Record<string, string>): Partial<Record<Field, number>> {
  const counts: Partial<Record<Field, number>> = {}
  for (const field of FIELDS) {
    const value = Number(hash[field] ?? 0)
    if (Number.isFinite(value)) counts[field] = value
  }
  return counts
}

function parseSample(text: string): ShadowSample | undefined {
  try {
    const sample = JSON.parse(text) as ShadowSample
    return typeof sample.requestId === 'string' && typeof sample.at === 'string' && Array.isArray(sample.pointers) ? sample : undefined
  } catch {
    return undefined
  }
}
