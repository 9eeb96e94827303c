import { Redis, ReplyError, type RedisOptions } from 'ioredis'
import type { Logger } from 'pino'

export type StoreLogger = Pick<Logger, 'info' | 'warn'>

/** Redis calls fail fast instead of hanging a request: the per-replica map takes over (docs/scaling.md). */
const COMMAND_TIMEOUT_MS = 1_000
const CONNECT_TIMEOUT_MS = 2_000
/** Reconnect backoff: 100 ms doubling, at most 1 s between tries, never giving up. */
const MAX_RECONNECT_DELAY_MS = 1_000
/**
 * A server that stops answering (hung, paused, or black-holed by the network) keeps its TCP
 * connection, so no connection event says it is gone (SPEC 12, "The shared store"): it counts as
 * down when this many commands in a row time out, or when the PING sent every PROBE_INTERVAL_MS
 * while it is up gets no reply within the command timeout, which finds a hang within about a
 * second whether or not requests are asking. While it is down, a PING every PROBE_INTERVAL_MS
 * brings it back once it answers.
 */
const TIMEOUTS_BEFORE_DOWN = 3
const PROBE_INTERVAL_MS = 1_000
const COMMAND_TIMED_OUT = 'Command timed out'
const STORE_DOWN = 'store redis is down'

/**
 * Whether a command failed with the server's own error reply (NOPERM, OOM, READONLY, a script's
 * error): the server answered, and what failed was not applied. A timeout or a lost connection
 * may still have been.
 */
export function isReplyError(error: unknown): boolean {
  return error instanceof ReplyError
}

export interface RedisConnection {
  /** True while the connection is ready and the server answers; commands are only sent then. */
  isUp(): boolean
  /**
   * Sends a command through this connection, counting its timeouts (a hung server is down). A
   * caller never waits on a server that is down: its wait ends when the server is found down,
   * and a command sent while it is down is still sent (a lock's clean-up must run after what
   * went before it, should the server go on) but fails at once.
   */
  run<T>(command: (client: Redis) => Promise<T>): Promise<T>
  /** Settles once the first connection attempt has succeeded or failed, or after `timeoutMs`. */
  firstAttempt(timeoutMs: number): Promise<void>
  /** Hears each change of state (down, up), as it is logged: once per change. */
  onChange(listener: (up: boolean) => void): void
  close(): Promise<void>
}

/** Where Redis is, for logs: the URL without its credentials. */
export function describeRedisUrl(url: string): string {
  const parsed = new URL(url)
  return `${parsed.protocol}//${parsed.host}${parsed.pathname === '/' ? '' : parsed.pathname}`
}

/**
 * ioredis's own options for a `redis://` or `rediss://` URL, read with the WHATWG parser the config
 * was validated with. Handed the URL itself, ioredis reads it with Node's legacy `url.parse`,
 * which reads some URLs differently (a `\` in the password becomes a `/`, so host and password
 * change) and prints the whole URL, password included, in a deprecation warning.
 */
export function redisOptionsFromUrl(url: string): Pick<RedisOptions, 'host' | 'port' | 'username' | 'password' | 'db' | 'tls'> {
  const parsed = new URL(url)
  const options: Pick<RedisOptions, 'host' | 'port' | 'username' | 'password' | 'db' | 'tls'> = {
    // An IPv6 literal comes bracketed: the socket wants the address alone.
    host: parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname,
    port: parsed.port === '' ? DEFAULT_REDIS_PORT : Number(parsed.port)
  }
  if (parsed.username !== '') options.username = decodeURIComponent(parsed.username)
  if (parsed.password !== '') options.password = decodeURIComponent(parsed.password)
  if (parsed.pathname.length > 1) options.db = Number(parsed.pathname.slice(1))
  if (parsed.protocol === 'rediss:') options.tls = {}
  return options
}

const DEFAULT_REDIS_PORT = 6379

function reconnectDelayMs(times: number): number {
  return Math.min(100 * 2 ** Math.max(0, times - 1), MAX_RECONNECT_DELAY_MS)
}

/**
 * One ioredis client with its reachability tracked from connection events and, for a server
 * that hangs with its connection open, from commands that time out (every command goes through
 * `run`). Each change is logged once (down, up), never once per failed reconnect, which would
 * flood the log for as long as an outage lasts. ioredis reconnects by itself; `enableOfflineQueue: false` makes a command sent while
 * it is away fail at once instead of waiting in a queue.
 */
export function createRedisConnection(url: string, logger: StoreLogger): RedisConnection {
  const redis = describeRedisUrl(url)
  const client = new Redis({
    ...redisOptionsFromUrl(url),
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
  const listeners: Array<(up: boolean) => void> = []
  let timeoutsInARow = 0
  let probe: NodeJS.Timeout | undefined
  let heartbeat: NodeJS.Timeout | undefined
  /** The callers waiting on a command now: told at once when the server is found down. */
  const waiting = new Set<(error: Error) => void>()

  function change(next: 'up' | 'down'): void {
    if (state === next || closing) return
    state = next
    for (const resolve of settled.splice(0)) resolve()
    if (next === 'up') beatWhileUp()
    else {
      clearTimeout(heartbeat)
      heartbeat = undefined
      const down = new Error(STORE_DOWN)
      for (const giveUp of [...waiting]) giveUp(down)
      waiting.clear()
    }
    if (next === 'up') logger.info({ store: 'redis', redis }, 'store redis is up: the replicas share sessions, registry, overrides, pauses and idempotency records')
    else logger.warn({ store: 'redis', redis, reason: lastErrorCode }, "store redis is down: serving from this replica's own memory")
    for (const listener of listeners) listener(next === 'up')
  }

  /** While the server does not answer: a PING now and then, until one is answered. */
  function probeUntilAnswered(): void {
    probe = setTimeout(() => {
      client.ping().then(
        () => {
          probe = undefined
          timeoutsInARow = 0
          lastErrorCode = undefined
          if (client.status === 'ready') change('up')
        },
        () => {
          if (!closing && state === 'down') probeUntilAnswered()
          else probe = undefined
        }
      )
    }, PROBE_INTERVAL_MS)
    probe.unref()
  }

  function noteTimeout(): void {
    timeoutsInARow++
    if (timeoutsInARow < TIMEOUTS_BEFORE_DOWN || state !== 'up') return
    downForSilence()
  }

  /** The server keeps its connection but does not answer: down until a probe PING is answered. */
  function downForSilence(): void {
    lastErrorCode = 'COMMAND_TIMEOUT'
    change('down')
    clearTimeout(probe)
    probeUntilAnswered()
  }

  /** While the server is up: a PING every PROBE_INTERVAL_MS; one without a reply within the command timeout is a hang. */
  function beatWhileUp(): void {
    clearTimeout(heartbeat)
    heartbeat = setTimeout(() => {
      heartbeat = undefined
      if (closing || state !== 'up') return
      client.ping().then(
        () => {
          timeoutsInARow = 0
          if (state === 'up') beatWhileUp()
        },
        (error: unknown) => {
          if (closing || state !== 'up') return
          if (error instanceof Error && error.message === COMMAND_TIMED_OUT) downForSilence()
          // Not sent (the connection is going): its close and reconnect events say what follows.
          else beatWhileUp()
        }
      )
    }, PROBE_INTERVAL_MS)
    heartbeat.unref()
  }

  client.on('ready', function onRedisReady() {
    clearTimeout(probe)
    probe = undefined
    lastErrorCode = undefined
    timeoutsInARow = 0
    change('up')
  })
  // A listener is required: ioredis would print unhandled 'error' events itself.
  client.on('error', function onRedisError(error: Error & { code?: string }) {
    lastErrorCode = error.code ?? error.message
    if (client.status !== 'ready') change('down')
  })
  client.on('close', function onRedisClose() {
    // A server that goes away cleanly (shut down, or killed: the kernel closes its sockets) sends no error.
    lastErrorCode ??= 'CONNECTION_CLOSED'
    change('down')
  })

  return {
    isUp: () => state === 'up' && client.status === 'ready',
    run(command) {
      const sent = command(client).then(
        (result) => {
          timeoutsInARow = 0
          return result
        },
        (error: unknown) => {
          if (error instanceof Error && error.message === COMMAND_TIMED_OUT) noteTimeout()
          throw error
        }
      )
      if (state === 'down') {
        sent.catch(() => undefined)
        return Promise.reject(new Error(STORE_DOWN))
      }
      return new Promise((resolve, reject) => {
        waiting.add(reject)
        sent.then(resolve, reject).finally(() => waiting.delete(reject))
      })
    },
    onChange(listener) {
      listeners.push(listener)
    },
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
      clearTimeout(probe)
      clearTimeout(heartbeat)
      if (client.status === 'ready') {
        await client.quit().catch(() => client.disconnect())
      } else {
        client.disconnect()
      }
    }
  }
}
