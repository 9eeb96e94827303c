import { createRedisConnection, type RedisConnection, type StoreLogger } from './redis-connection.js'

/** SPEC 12: what `v4gw_store_unavailable_total{feature}` counts, per request served without the store. */
export type StoreFeature = 'sessions' | 'registry' | 'idempotency'

/**
 * SPEC 12's shared store, as every feature that shares state sees it: one Redis connection per
 * process (one reachability, logged once per change), or none with `store: memory`. Each feature
 * keeps its own key family below `keyPrefix` and its own memory for when the store is away.
 */
export interface SharedStore {
  readonly kind: 'memory' | 'redis'
  readonly keyPrefix: string
  /** The connection, with `store.kind: redis` only. */
  readonly connection: RedisConnection | undefined
  /** True while Redis answers; always false with `store: memory` (there is nothing to share). */
  isUp(): boolean
  /** Hears each change of reachability (never with `store: memory`). */
  onChange(listener: (up: boolean) => void): void
  /** A request was served without the store it would have used (SPEC 12's counter). */
  countUnavailable(feature: StoreFeature): void
  /** Seconds this replica's clock is ahead of the store's (SPEC 12 "Clocks"), once measured. */
  clockOffsetSeconds(): number | undefined
  close(): Promise<void>
}

export interface SharedStoreOptions {
  kind: 'memory' | 'redis'
  url: string | null
  keyPrefix: string
  logger: StoreLogger
  /** Hears every request served without the store (the metric is built after the store). */
  onUnavailable?: (feature: StoreFeature) => void
  /** How long creating waits for the first connection attempt; default 2 s. */
  connectWaitMs?: number
  /** How often the clock is compared with Redis's `TIME`; default once a minute (SPEC 12). */
  clockCheckMs?: number
}

/** `store: memory`: nothing is shared, every feature keeps this process's state. */
export function memorySharedStore(keyPrefix = 'v4gw:', countUnavailable: (feature: StoreFeature) => void = () => undefined): SharedStore {
  return {
    kind: 'memory',
    keyPrefix,
    connection: undefined,
    isUp: () => false,
    onChange: () => undefined,
    countUnavailable,
    clockOffsetSeconds: () => undefined,
    close: () => Promise.resolve()
  }
}

const CLOCK_CHECK_MS = 60_000
/** SPEC 12: a replica whose clock is more than this off the store's warns. */
const CLOCK_WARN_SECONDS = 1

export async function createSharedStore(options: SharedStoreOptions): Promise<SharedStore> {
  let onUnavailable = options.onUnavailable
  const countUnavailable = (feature: StoreFeature): void => onUnavailable?.(feature)
  if (options.kind === 'memory' || options.url === null) return memorySharedStore(options.keyPrefix, countUnavailable)
  const connection = createRedisConnection(options.url, options.logger)
  const clock = watchClock(connection, options.logger, options.clockCheckMs ?? CLOCK_CHECK_MS)
  watchEvictionPolicy(connection, options.logger)
  await connection.firstAttempt(options.connectWaitMs ?? 2_000)
  return {
    kind: 'redis',
    keyPrefix: options.keyPrefix,
    connection,
    isUp: () => connection.isUp(),
    onChange: (listener) => connection.onChange(listener),
    countUnavailable,
    clockOffsetSeconds: clock.offsetSeconds,
    async close() {
      clock.stop()
      onUnavailable = undefined
      await connection.close()
    }
  }
}

/**
 * Compares this replica's clock with the server's `TIME` when the store comes up and then every
 * `everyMs` (SPEC 12 "Clocks"): windows and expiries are judged by the replica's clock, so a
 * drifting one should be seen. The offset takes the middle of the round trip as the moment the
 * server read its clock. A warning is logged when the offset goes past 1 s, once per crossing.
 */
function watchClock(connection: RedisConnection, logger: StoreLogger, everyMs: number): { offsetSeconds: () => number | undefined; stop: () => void } {
  let offset: number | undefined
  let warned = false
  let timer: NodeJS.Timeout | undefined
  let stopped = false

  async function measure(): Promise<void> {
    if (!connection.isUp()) return
    const sentAt = Date.now()
    const [seconds, micros] = await connection.run((client) => client.time())
    const receivedAt = Date.now()
    const serverMs = Number(seconds) * 1_000 + Number(micros) / 1_000
    offset = ((sentAt + receivedAt) / 2 - serverMs) / 1_000
    const off = Math.abs(offset) > CLOCK_WARN_SECONDS
    if (off && !warned) logger.warn({ store: 'redis', clockOffsetSeconds: Number(offset.toFixed(3)) }, "this replica's clock is more than 1 s off the store's: brownout windows, pauses and overrides start and end off time")
    warned = off
  }

  function schedule(): void {
    if (stopped) return
    timer = setTimeout(() => {
      measure().catch(() => undefined).finally(schedule)
    }, everyMs)
    timer.unref()
  }

  connection.onChange((up) => {
    if (up) measure().catch(() => undefined)
  })
  schedule()
  return {
    offsetSeconds: () => offset,
    stop() {
      stopped = true
      clearTimeout(timer)
    }
  }
}

/**
 * Warns, each time the store comes up, when Redis may evict keys that have no TTL (`allkeys-*`):
 * the client registry keeps each route's sunset evidence without one (fleet/registry-redis.ts), so
 * only such a policy can drop it and let `sunset-check` pass on a route a client still calls.
 * A server that refuses CONFIG (managed Redis often renames it) is not judged.
 */
function watchEvictionPolicy(connection: RedisConnection, logger: StoreLogger): void {
  async function check(): Promise<void> {
    const [, policy] = (await connection.run((client) => client.config('GET', 'maxmemory-policy'))) as [string?, string?]
    if (policy?.startsWith('allkeys-') === true) {
      logger.warn({ store: 'redis', maxmemoryPolicy: policy }, 'Redis may evict any key when full (maxmemory-policy allkeys-*): the client registry can lose a route\'s evidence and sunset-check then pass on a route still called; use volatile-* or noeviction')
    }
  }
  connection.onChange((up) => {
    if (up) check().catch(() => undefined)
  })
}
