import type { GatewayConfig } from '../config/schema.js'
import type { StoreLogger } from '../store/redis-connection.js'
import type { SharedStore } from '../store/shared-store.js'
import { buildRedisSessionStore } from './redis-session-store.js'
import { createMemorySessionStore, type SessionStore } from './session-store.js'

/** The longest a start lock lives, so a crashed owner holds up a key for 10 s at most (docs/scaling.md). */
export const MAX_START_LOCK_MS = 10_000

/**
 * A start lock's life: how long a crashed owner holds up a key (a live owner renews it while its
 * start runs), as long as a `sessions.start` may take (`limits.upstreamTimeoutMs`), capped.
 */
export function startLockMs(upstreamTimeoutMs: number): number {
  return Math.min(upstreamTimeoutMs, MAX_START_LOCK_MS)
}

/**
 * How long a waiter waits for a live owner's start: the longest that start may take (its
 * connection, then its answer's headers: undici counts the upstream timeout from the connection
 * on), and a second. Past it, the waiter starts its own session (a second session, never a hang).
 */
export function startWaitMs(limits: Pick<GatewayConfig['limits'], 'upstreamTimeoutMs' | 'connectTimeoutMs'>): number {
  return limits.connectTimeoutMs + limits.upstreamTimeoutMs + 1_000
}

/**
 * The session store on the shared store (SPEC 12): the in-memory LRU (default) or Redis/Valkey
 * shared by replicas. `currentLimits` gives the running config's limits, so that the start lock
 * follows a reload of `limits.upstreamTimeoutMs`; the start config's without it.
 */
export function createSessionStore(
  config: GatewayConfig,
  store: SharedStore,
  logger: StoreLogger,
  hooks: { onCapacityEvict?: () => void } = {},
  currentLimits: () => GatewayConfig['limits'] = () => config.limits
): SessionStore {
  const { sessions } = config
  if (store.connection === undefined) {
    return createMemorySessionStore({ maxEntries: sessions.maxEntries, ttlMs: sessions.ttlMs, onCapacityEvict: hooks.onCapacityEvict })
  }
  // Redis evicts by its own policy (docs/scaling.md); the local copies going are not sessions lost.
  return buildRedisSessionStore(store.connection, {
    keyPrefix: store.keyPrefix,
    maxEntries: sessions.maxEntries,
    ttlMs: sessions.ttlMs,
    lockMs: () => startLockMs(currentLimits().upstreamTimeoutMs),
    // The upstream client keeps the start's connect timeout (restart-only); the upstream timeout follows a reload.
    waitMs: () => startWaitMs({ connectTimeoutMs: config.limits.connectTimeoutMs, upstreamTimeoutMs: currentLimits().upstreamTimeoutMs }),
    logger,
    onUnavailable: () => store.countUnavailable('sessions')
  }, { ownsConnection: false })
}
