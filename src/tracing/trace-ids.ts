import { randomFillSync } from 'node:crypto'

/** Random bytes drawn at a time: the ids of about a hundred unsampled requests. */
const POOL_BYTES = 4096
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
 * Buffer-to-hex conversion, and its ratio sampler then parses the hex back (with a regular
 * expression check first): together a third of what tracing at `sampleRatio: 0.01` cost an
 * unsampled request (docs/performance.md). Here the ratio is decided on the bytes, and an
 * unsampled request's ids are cut from the pool's hex text (a slice, no conversion). Ids that
 * outlive their request, those of recorded spans (kept in the export queue), are converted on
 * their own, so that no queued span keeps a pool's text alive. Unit tests hold the ids to the
 * SDK's and the decision to its TraceIdRatioBasedSampler.
 */
export class TraceIds {
  private readonly pool = Buffer.allocUnsafe(POOL_BYTES)
  /** The pool as hex, made once per pool. */
  private hex = ''
  /** The next unused byte of the pool (all used: drawn again before the next id). */
  private next = POOL_BYTES

  /** A new root's trace id, sampled when its words XORed are below `bound` (ratioBound). */
  root(bound: number): RootTrace {
    const at = this.draw(TRACE_ID_BYTES)
    const pool = this.pool
    const words = (pool.readUInt32BE(at) ^ pool.readUInt32BE(at + 4) ^ pool.readUInt32BE(at + 8) ^ pool.readUInt32BE(at + 12)) >>> 0
    const sampled = words < bound
    // A sampled request's ids are kept with its spans: converted on their own.
    const traceId = sampled ? pool.toString('hex', at, at + TRACE_ID_BYTES) : this.hex.slice(at * 2, (at + TRACE_ID_BYTES) * 2)
    return { traceId, sampled }
  }

  /** A span id that lives as long as its request: an unsampled request's and its calls'. */
  spanId = (): string => {
    const at = this.draw(SPAN_ID_BYTES)
    return this.hex.slice(at * 2, (at + SPAN_ID_BYTES) * 2)
  }

  /** A span id kept beyond its request (a recorded span's). */
  keptSpanId = (): string => {
    const at = this.draw(SPAN_ID_BYTES)
    return this.pool.toString('hex', at, at + SPAN_ID_BYTES)
  }

  /** The offset of `bytes` unused random bytes, not all zero (W3C: an all-zero id is invalid). */
  private draw(bytes: number): number {
    for (;;) {
      if (this.next + bytes > POOL_BYTES) {
        randomFillSync(this.pool)
        this.hex = this.pool.toString('hex')
        this.next = 0
      }
      const at = this.next
      this.next += bytes
      if (!this.allZero(at, bytes)) return at
    }
  }

  private allZero(at: number, bytes: number): boolean {
    for (let index = at; index < at + bytes; index++) if (this.pool[index] !== 0) return false
    return true
  }
}
