import { Redis } from 'ioredis'
import type { Logger } from 'pino'

export type StoreLogger = Pick<Logger, 'info' | 'warn'>

/** Redis calls fail fast instead of hanging a request: the per-replica map takes over (issue 7 point 4). */
const COMMAND_TIMEOUT_MS = 1_000
const CONNECT_TIMEOUT_MS = 2_000
/** Reconnect backoff: 100 ms doubling, at most 1 s between tries, never giving up. */
const MAX_RECONNECT_DELAY_MS = 1_000

export interface RedisConnection {
  readonly client: Redis
  /** True while the connection is ready; commands are only sent then. */
  isUp(): boolean
  /** Settles once the first connection attempt has succeeded or failed, or after `timeoutMs`. */
  firstAttempt(timeoutMs: number): Promise<void>
  close(): Promise<void>
}

/** Where Redis is, for logs: the URL without its credentials. */
export function describeRedisUrl(url: string): string {
  const parsed = new URL(url)
  return `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`
}

function reconnectDelayMs(times: number): number {
  return Math.min(100 * 2 ** Math.max(0, times - 1), MAX_RECONNECT_DELAY_MS)
}

/**
 * One ioredis client with its reachability tracked from connection events. Each change is
 * logged once (down, up), never once per failed reconnect (issue 7 point 4). ioredis
 * reconnects by itself; `enableOfflineQueue: false` makes a command sent while it is away
 * fail at once instead of waiting in a queue.
 */
export function createRedisConnection(url: string, logger: StoreLogger): RedisConnection {
  const redis = describeRedisUrl(url)
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: reconnectDelayMs
  })
  let state: 'unknown' | 'up' | 'down' = 'unknown'
  let lastErrorCode: string | undefined
  let closing = false
  const settled: Array<() => void> = []

  function change(next: 'up' | 'down'): void {
    if (state === next || closing) return
    state = next
    for (const resolve of settled.splice(0)) resolve()
    if (next === 'up') logger.info({ sessionStore: 'redis', redis }, 'session store redis is up: the session map is shared by the replicas')
    else logger.warn({ sessionStore: 'redis', redis, reason: lastErrorCode }, "session store redis is down: serving with this replica's session map")
  }

  client.on('ready', function onRedisReady() {
    lastErrorCode = undefined
    change('up')
  })
  // A listener is required: ioredis would print unhandled 'error' events itself.
  client.on('error', function onRedisError(error: Error & { code?: string }) {
    lastErrorCode = error.code ?? error.message
    if (client.status !== 'ready') change('down')
  })
  client.on('close', function onRedisClose() {
    change('down')
  })

  return {
    client,
    isUp: () => state === 'up' && client.status === 'ready',
    firstAttempt(timeoutMs) {
      if (state !== 'unknown') return Promise.resolve()
      return new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, timeoutMs)
        settled.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    },
    async close() {
      closing = true
      if (client.status === 'ready') {
        await client.quit().catch(() => client.disconnect())
      } else {
        client.disconnect()
      }
    }
  }
}
