import { pino, type DestinationStream, type Logger } from 'pino'
import { LineBatcher, type BatchTarget } from './line-batcher.js'

/**
 * Every place a credential could reach a log line (SPEC 9). The access log never logs headers
 * or query strings; this list is the second line of defence, compiled once by pino.
 */
export const REDACTED_HEADERS = ['authorization', 'x-service-api-key', 'x-api-key', 'x-session-token', 'cookie', 'set-cookie', 'proxy-authorization'] as const

export const REDACT_PATHS: string[] = [
  ...['req.headers', 'res.headers', 'headers', 'request.headers', 'upstream.headers'].flatMap((base) => REDACTED_HEADERS.map((name) => `${base}["${name}"]`)),
  // Node attaches the raw request bytes, headers and all, to an HTTP parser error; fastify's
  // default clientError handler (the admin listener) logs that error at trace level.
  // (Only under `err`, pino's error key: `error` is an access-line field, the error code, which must not be censored.)
  'err.rawPacket'
]

export interface LoggerOptions {
  level: string
  /** Where the JSON lines go; stdout when omitted. Tests pass a sink to read the bytes. */
  destination?: DestinationStream
}

export interface LogDestination {
  stream: DestinationStream
  /** Writes what is buffered now; for the process's last moments. */
  flushSync(): void
  /** Lines dropped so far because the reader of the destination fell LOG_MAX_PENDING_BYTES behind (SPEC 10). */
  droppedLines(): number
}

/**
 * A batch is written once it holds this many bytes or its oldest line is this old, like
 * Envoy's access-log flush interval. Each async write is a hand-off to libuv's thread pool that
 * costs more CPU than the write itself (about 50 µs against 14 µs for 64 KiB to a file on this
 * VM): at 12 KiB batches that was 2 % of a request's CPU, at 64 KiB about 1 % (docs/performance.md).
 * Four pipe buffers (64 KiB on Linux): a longer write goes in parts, on a pool thread, never the
 * event loop, which sonic-boom handles. A hard kill loses at most the last 250 ms of lines.
 */
const LOG_BATCH_BYTES = 262_144
const LOG_FLUSH_INTERVAL_MS = 250
/**
 * Bytes handed to stdout and not yet written, at most: a reader that stops (a paused log
 * shipper, a blocked container log driver, `v4gw | slow`) would otherwise grow the process's
 * memory by every line (SPEC 10: shed, never grow without bound). Past it a batch is dropped and
 * its lines counted (v4gw_log_lines_dropped_total); about 18 s of lines at 10,000 requests a second.
 */
const LOG_MAX_PENDING_BYTES = 64 * 1024 * 1024

/**
 * stdout, written in batches: one write syscall per log line cost as much as a proxied
 * request's own writes. A line waits at most LOG_FLUSH_INTERVAL_MS; `flushSync` on exit.
 */
export function createStdoutDestination(): LogDestination {
  return createBatchedDestination(1)
}

/**
 * Lines batched into a file descriptor or a file (stdout in production; a file in a test of the
 * batches' reuse). `maxDelayMs`: a test that watches batches fill sets it long.
 */
export function createBatchedDestination(dest: number | string, maxDelayMs = LOG_FLUSH_INTERVAL_MS, maxPendingBytes = LOG_MAX_PENDING_BYTES): LogDestination {
  // Buffers, not strings: the batcher has encoded the lines already (line-batcher.ts). sonic-boom
  // drops a write that would take what it holds unwritten past `maxLength`, and says so ('drop').
  const sonic = pino.destination({ dest, sync: false, contentMode: 'buffer', maxLength: maxPendingBytes })
  let dropped = 0
  let lastWriteDropped = false
  sonic.on('drop', (data: Buffer) => {
    lastWriteDropped = true
    dropped += countLines(data)
  })
  const target: BatchTarget = {
    write: (chunk) => {
      lastWriteDropped = false
      // sonic-boom's types declare write(string); with contentMode 'buffer' it takes the Buffer (its README).
      sonic.write(chunk as unknown as string)
      return !lastWriteDropped
    },
    flushSync: () => sonic.flushSync(),
    // sonic-boom reads its `sync` option at each write: set, an idle stream writes what it is
    // handed at once (its retries on EAGAIN included) instead of starting an asynchronous write.
    syncFromNow: () => {
      // Declared as an option only in sonic-boom's types; the stream keeps it as this field.
      ;(sonic as unknown as { sync: boolean }).sync = true
    },
    // sonic-boom reports each write's byte count, in order: written batches are reused (line-batcher.ts).
    onWritten: (listener) => void sonic.on('write', listener)
  }
  const batcher = new LineBatcher(target, { maxBytes: LOG_BATCH_BYTES, maxDelayMs })
  return { stream: batcher, flushSync: () => batcher.flushSync(), droppedLines: () => dropped }
}

function countLines(data: Buffer): number {
  let lines = 0
  for (let at = data.indexOf(0x0a); at !== -1; at = data.indexOf(0x0a, at + 1)) lines++
  return lines
}

/** The fields every line of the gateway's own loggers starts with, after level and time. */
const BASE_BINDINGS = { service: 'v4gw' }

/** How a logger made by createLogger writes a line: pino's defaults, these bindings, this destination. */
export interface OwnLineFormat {
  readonly destination: DestinationStream
  /** The bindings as pino writes them after `"time"`: `,"service":"v4gw"`. */
  readonly bindings: string
}

const ownFormats = new WeakMap<Logger, OwnLineFormat>()

export function createLogger(options: LoggerOptions): Logger {
  const destination = options.destination ?? createStdoutDestination().stream
  const logger = pino(
    {
      level: options.level,
      base: BASE_BINDINGS,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      // pino's default epoch-ms "time": a formatted date per line costs more than the rest of it.
      timestamp: pino.stdTimeFunctions.epochTime
    },
    destination
  )
  ownFormats.set(logger, { destination, bindings: `,${JSON.stringify(BASE_BINDINGS).slice(1, -1)}` })
  return logger
}

/**
 * The format of a logger made above, known because it was made here: the access log writes its
 * one line per request in it directly (access-log.ts). Undefined for any other logger, a child
 * of one of these included (its bindings differ).
 */
export function ownLineFormat(logger: Logger): OwnLineFormat | undefined {
  return ownFormats.get(logger)
}
