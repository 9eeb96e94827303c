import { randomFillSync } from 'node:crypto'

/** Random bytes drawn at a time: the ids of about two thousand unsampled requests. */
const POOL_BYTES = 64 * 1024
/**
 * Bytes turned into hex text at a time. An unsampled request's ids are slices of that text, and a
 * slice keeps the whole text alive while its request lives (a long stream too): 512 characters,
 * small beside what a connection holds anyway.
 */
const WINDOW_BYTES = 256
const TRACE_ID_BYTES = 16
const SPAN_ID_BYTES = 8

/** A new root's trace id, and whether the ratio samples it. */
export interface RootTrace {
  readonly traceId: string
  readonly sampled: boolean
}

/**
 * TraceIdRatioBased's bound for a ratio, as the SDK's TraceIdRatioBasedSampler computes it: a
 * trace is sampled when its id's four 32-bit words XORed together are below it.
 */
export function ratioBound(ratio: number): number {
  if (!(ratio > 0)) return 0
  return ratio >= 1 ? 0x1_0000_0000 : Math.floor(ratio * 0xffff_ffff)
}

/**
 * W3C Trace Context ids (3.2.2.3, 3.2.2.4: 16 and 8 random bytes as lowercase hex, not all zero)
 * and the TraceIdRatioBased decision on a new root, from a pool of crypto-random bytes.
 *
 * Every traced request needs a trace id and a span id, and each of its upstream calls a span
 * id, sampled or not. The SDK's RandomIdGenerator makes each id from Math.random() and a
 * Buffer-to-hex conversion, and its ratio sampler then validates and parses the hex back:
 * together most of what tracing cost an unsampled request (docs/performance.md). Here the ratio
 * is decided on the bytes, and an unsampled request's ids are slices of hex text made a window
 * at a time. Ids kept beyond their request (a recorded span's, queued for export) are converted
 * on their own, so that no queued span keeps a window alive. Unit tests hold the ids to the
 * SDK's and the decision to its TraceIdRatioBasedSampler.
 */
export class TraceIds {
  private readonly pool = Buffer.allocUnsafe(POOL_BYTES)
  /** The next unused byte of the pool. */
  private next = POOL_BYTES
  /** The current window of hex text: where it starts and ends in the pool (the pool is drawn first). */
  private window = 0
  private end = POOL_BYTES
  private hex = ''

  /** `fill`: the random source (crypto; a test hands in its own bytes). */
  constructor(private readonly fill: (pool: Buffer) => void = randomFillSync) {}

  /** A new root's trace id, sampled when its words XORed are below `bound` (ratioBound). */
  root(bound: number): RootTrace {
    const at = this.draw(TRACE_ID_BYTES)
    const pool = this.pool
    const words = (pool.readUInt32BE(at) ^ pool.readUInt32BE(at + 4) ^ pool.readUInt32BE(at + 8) ^ pool.readUInt32BE(at + 12)) >>> 0
    const sampled = words < bound
    // A sampled request's trace id is kept with its spans: converted on its own.
    return { traceId: sampled ? pool.toString('hex', at, at + TRACE_ID_BYTES) : this.slice(at, TRACE_ID_BYTES), sampled }
  }

  /** A span id that lives as long as its request: an unsampled request's and its calls'. */
  spanId = (): string => this.slice(this.draw(SPAN_ID_BYTES), SPAN_ID_BYTES)

  /** A span id kept beyond its request (a recorded span's). */
  keptSpanId = (): string => {
    const at = this.draw(SPAN_ID_BYTES)
    return this.pool.toString('hex', at, at + SPAN_ID_BYTES)
  }

  private slice(at: number, bytes: number): string {
    const from = (at - this.window) * 2
    return this.hex.slice(from, from + bytes * 2)
  }

  /** The offset of `bytes` unused random bytes, not all zero (W3C: an all-zero id is invalid), within one window. */
  private draw(bytes: number): number {
    for (;;) {
      if (this.next + bytes > this.end) this.nextWindow()
      const at = this.next
      this.next += bytes
      if (!this.allZero(at, bytes)) return at
    }
  }

  private nextWindow(): void {
    let start = this.end
    if (start + WINDOW_BYTES > POOL_BYTES) {
      this.fill(this.pool)
      start = 0
    }
    this.window = start
    this.end = start + WINDOW_BYTES
    this.next = start
    this.hex = this.pool.toString('hex', start, this.end)
  }

  private allZero(at: number, bytes: number): boolean {
    for (let index = at; index < at + bytes; index++) if (this.pool[index] !== 0) return false
    return true
  }
}
