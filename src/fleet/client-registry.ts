import type { GatewayConfig } from '../config/schema.js'
import type { StoreLogger } from '../store/redis-connection.js'
import type { SharedStore } from '../store/shared-store.js'
import type { FleetScope } from './fleet-records.js'
import { RegistryData, type LegacySample, type RegistryBounds } from './registry-data.js'
import { readFleet, writeDelta } from './registry-redis.js'
import { viewOfData, type RegistryView } from './registry-view.js'

export type { LegacySample, RegistryBounds } from './registry-data.js'
export type { ClientView, RegistryView, RouteView, TenantView } from './registry-view.js'

export interface ClientRegistryOptions {
  store: SharedStore
  bounds: RegistryBounds
  /** `store.flushMs`: a replica writes its counts at most this often (SPEC 12). */
  flushMs: number
  /** The running config's hash (SPEC 17), written with each flush for the answer's `configHashes`. */
  configHash: () => string
  logger: StoreLogger
  /** How often retention is applied in memory; default once a minute. */
  sweepMs?: number
  /** Client records per write to the store at most (RegistryData.parts); default WRITE_PART_CLIENTS. */
  writePartClients?: number
}

/**
 * Client records per write: each costs the store a few commands in one script (about 10 µs),
 * so a part takes milliseconds, far inside the 1 s command timeout that a whole delta gathered
 * over a long outage could outlast, and re-sent, be counted again at every flush.
 */
const WRITE_PART_CLIENTS = 1_000

/**
 * SPEC 12's client registry. Recording a request touches memory only (a few Map operations); no
 * request waits on the store. With `store: memory` the counts are this process's since it started
 * (`scope: "replica"`). With Redis each replica keeps the delta it has not written yet and writes
 * it in one pipeline every `flushMs` (a delta of over WRITE_PART_CLIENTS clients, gathered in an
 * outage, in several, one after another); an answer reads the fleet's counts from Redis (`fleet`).
 * While Redis is away the delta keeps growing, answers show it (`local`: this replica since the
 * outage began) and requests are counted in `v4gw_store_unavailable_total{feature="registry"}`;
 * when Redis answers again the delta is added to it (counts summed, last seen the later, distinct
 * sets merged as HyperLogLog unions).
 */
export class ClientRegistry {
  readonly #store: SharedStore
  readonly #bounds: RegistryBounds
  readonly #flushMs: number
  readonly #configHash: () => string
  readonly #logger: StoreLogger
  readonly #shared: boolean
  /** With memory: everything. With Redis: what is not written yet. */
  #data: RegistryData
  #flushing: Promise<void> | undefined
  #flushTimer: NodeJS.Timeout | undefined
  #sweepTimer: NodeJS.Timeout | undefined
  #stopped = false
  #writeFailed = false
  readonly #writePartClients: number

  constructor(options: ClientRegistryOptions) {
    this.#store = options.store
    this.#bounds = options.bounds
    this.#flushMs = options.flushMs
    this.#configHash = options.configHash
    this.#logger = options.logger
    this.#writePartClients = options.writePartClients ?? WRITE_PART_CLIENTS
    this.#shared = options.store.connection !== undefined
    this.#data = new RegistryData(Date.now(), this.#bounds, this.#shared)
    const sweepMs = options.sweepMs ?? 60_000
    this.#sweepTimer = setInterval(() => this.#data.sweep(Date.now()), sweepMs)
    this.#sweepTimer.unref()
    if (this.#shared) {
      this.#scheduleFlush()
      // Back from an outage: what was counted meanwhile goes out now, not at the next tick.
      this.#store.onChange((up) => {
        if (up && !this.#stopped) void this.flush()
      })
    }
  }

  /** One legacy request (brownout and gone answers included). Memory only. */
  recordLegacy(sample: LegacySample): void {
    if (this.#shared && (this.#writeFailed || !this.#store.isUp())) this.#store.countUnavailable('registry')
    this.#data.recordLegacy(sample)
  }

  /** One native `/v4/*` request of a tenant, for its legacy share. */
  recordNative(tenant: string, atMs: number): void {
    this.#data.recordNative(tenant, atMs)
  }

  scope(): FleetScope {
    if (!this.#shared) return 'replica'
    return this.#store.isUp() && !this.#writeFailed ? 'fleet' : 'local'
  }

  /** After a reload: the bounds it lowered applied; removed routes keep their records (RegistryData.applyBounds). */
  applyBounds(): void {
    this.#data.applyBounds()
  }

  /**
   * What the registry knows of `routesOf` (tenant to its configured legacy routes), with at most
   * `clientsPerRoute` clients per route. With Redis up this replica writes its delta first, so the
   * answer holds its own counts up to now and the others' up to their last flush.
   */
  async view(routesOf: ReadonlyMap<string, readonly string[]>, clientsPerRoute: number): Promise<RegistryView> {
    const connection = this.#store.connection
    if (connection !== undefined && this.#store.isUp()) {
      try {
        await this.flush()
        // A store that answers but refuses this replica's writes (full with noeviction, a
        // read-only replica after a failover) holds the fleet's counts only up to the first
        // refusal: this replica's own are complete from its `since`, and said to be `local`.
        if (this.#writeFailed) return this.#localView(routesOf, clientsPerRoute)
        const nowMs = Date.now()
        const fleet = await readFleet(connection, this.#store.keyPrefix, routesOf, clientsPerRoute, nowMs, (tenant) => this.#bounds.forTenant(tenant).retentionDays)
        const own = this.#configHash()
        const configHashes = fleet.configHashes.includes(own) ? fleet.configHashes : [...fleet.configHashes, own]
        return { scope: 'fleet', sinceMs: fleet.sinceMs ?? nowMs, generatedAtMs: nowMs, configHashes: configHashes.sort(), tenants: fleet.tenants }
      } catch (error) {
        this.#logger.warn({ store: 'redis', reason: error instanceof Error ? error.message : String(error) }, "the registry could not be read from the store: answering with this replica's counts")
      }
    }
    return this.#localView(routesOf, clientsPerRoute)
  }

  /** This replica's counts: all of them in memory, what it has not written with Redis. */
  #localView(routesOf: ReadonlyMap<string, readonly string[]>, clientsPerRoute: number): RegistryView {
    const nowMs = Date.now()
    this.#data.sweep(nowMs)
    return {
      scope: this.#shared ? 'local' : 'replica',
      sinceMs: this.#data.startMs,
      generatedAtMs: nowMs,
      configHashes: [this.#configHash()],
      tenants: viewOfData(this.#data, [...routesOf.keys()], clientsPerRoute, nowMs)
    }
  }

  /** Writes the delta (with Redis, when it answers); one at a time. */
  flush(): Promise<void> {
    this.#flushing ??= this.#write().finally(() => {
      this.#flushing = undefined
    })
    return this.#flushing
  }

  /** Stops the timers and writes what is left (a replica that stops loses no counts while Redis answers). */
  async close(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#flushTimer)
    clearInterval(this.#sweepTimer)
    if (this.#shared) {
      // A write under way took only what was counted before it: what came after goes now.
      await this.#flushing
      await this.flush()
      // SPEC 12 adds the counts of an outage to the store when it answers again; a replica that
      // stops first cannot, and the fleet's answers (their `since` included) will not show them:
      // said, so that a sunset decided on them can be checked against this line.
      const lost = this.#data.requestTotals()
      if (lost.routes + lost.shareLegacy + lost.shareNative > 0) {
        this.#logger.warn(
          { store: 'redis', legacyRequests: Math.max(lost.routes, lost.shareLegacy), nativeRequests: lost.shareNative, since: new Date(this.#data.startMs).toISOString() },
          "the registry counts held on this replica could not be written to the store before it stopped: the fleet's registry misses these requests"
        )
      }
    }
  }

  async #write(): Promise<void> {
    const connection = this.#store.connection
    if (connection === undefined || !this.#store.isUp()) return
    const delta = this.#data
    const nowMs = Date.now()
    this.#data = new RegistryData(nowMs, this.#bounds, true)
    const parts = delta.parts(this.#writePartClients)
    // Parts the store took whole; then what it refused of the next one, or why it broke off.
    let taken = 0
    let refused: RegistryData | undefined
    let failure: unknown
    try {
      for (; taken < parts.length; taken++) {
        refused = await writeDelta(connection, this.#store.keyPrefix, parts[taken] as RegistryData, this.#bounds, this.#configHash(), nowMs)
        if (refused !== undefined) break
      }
    } catch (error) {
      failure = error
    }
    if (refused === undefined && failure === undefined) {
      if (this.#writeFailed) this.#logger.info({ store: 'redis' }, 'the registry counts held on this replica were written to the store')
      this.#writeFailed = false
      return
    }
    // Kept for the next write, the counts made since on top of them: what the store refused of
    // the part it stopped at (all of it when the pipeline broke) and the parts after it, never
    // what it took (SPEC 12: counts summed once).
    const rest = refused === undefined ? parts.slice(taken) : [refused, ...parts.slice(taken + 1)]
    for (const part of rest) this.#data.absorb(part)
    // The store holds some of the delta: this replica's counts are whole only from this write on.
    if (taken > 0 || (refused !== undefined && refused !== parts[taken])) this.#data.startMs = nowMs
    if (!this.#writeFailed) {
      const reason = failure === undefined ? 'the store refused part of the write' : failure instanceof Error ? failure.message : String(failure)
      this.#logger.warn({ store: 'redis', reason }, 'the registry counts could not be written to the store; this replica keeps them and writes them when it answers')
    }
    this.#writeFailed = true
  }

  #scheduleFlush(): void {
    if (this.#stopped) return
    this.#flushTimer = setTimeout(() => {
      this.flush().finally(() => this.#scheduleFlush())
    }, this.#flushMs)
    this.#flushTimer.unref()
  }
}

/**
 * SPEC 12's bounds from the running config: read per request, so a reload's new bounds apply at
 * once. A tenant a reload removed keeps the bounds it last had: its records (kept, so that its
 * return shows its history) age out by its own `retentionDays`, not the default's.
 */
export function boundsFromConfig(config: () => GatewayConfig): RegistryBounds {
  const lastKnown = new Map<string, { maxPerRoute: number; retentionDays: number }>()
  return {
    get maxTotal() {
      return config().clients.maxTotal
    },
    forTenant(tenant) {
      const configured = config().tenants[tenant]?.clients
      if (configured === undefined) return lastKnown.get(tenant) ?? DEFAULT_TENANT_BOUNDS
      if (lastKnown.get(tenant) !== configured) lastKnown.set(tenant, configured)
      return configured
    }
  }
}

const DEFAULT_TENANT_BOUNDS = Object.freeze({ maxPerRoute: 10_000, retentionDays: 90 })
