import type { GatewayConfig } from '../config/schema.js'
import type { StoreLogger } from './redis-connection.js'
import { createRedisSessionStore } from './redis-session-store.js'
import { createMemorySessionStore, type SessionStore } from './session-store.js'

/** The longest a start lock lives, so a crashed owner holds up a key for 10 s at most (docs/scaling.md). */
export const MAX_START_LOCK_MS = 10_000

/**
 * A start lock lives as long as a `sessions.start` may take (`limits.upstreamTimeoutMs`), capped:
 * a start slower than the cap lets a waiter start its own session (a second session, never a hang).
 */
export function startLockMs(upstreamTimeoutMs: number): number {
  return Math.min(upstreamTimeoutMs, MAX_START_LOCK_MS)
}

/** The session store `sessions.store` names: the in-memory LRU (default) or Redis/Valkey shared by replicas. */
export async function createSessionStore(config: GatewayConfig, logger: StoreLogger, hooks: { onCapacityEvict?: () => void } = {}): Promise<SessionStore> {
  const { sessions } = config
  if (sessions.store === 'memory' || sessions.redis.url === null) {
    return createMemorySessionStore({ maxEntries: sessions.maxEntries, ttlMs: sessions.ttlMs, onCapacityEvict: hooks.onCapacityEvict })
  }
  // Redis evicts by its own policy (docs/scaling.md); the local copies going are not sessions lost.
  return createRedisSessionStore({
    url: sessions.redis.url,
    keyPrefix: sessions.redis.keyPrefix,
    maxEntries: sessions.maxEntries,
    ttlMs: sessions.ttlMs,
    lockMs: startLockMs(config.limits.upstreamTimeoutMs),
    logger
  })
}
