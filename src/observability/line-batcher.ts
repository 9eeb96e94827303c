/** Where a batch goes: sonic-boom (pino.destination) with `contentMode: 'buffer'` in production. */
export interface BatchTarget {
  /** False when the target dropped the chunk (its reader too far behind): it will never report it written. */
  write(chunk: Buffer): boolean
  flushSync(): void
  /**
   * From now on, writes what it is handed before returning: the process's last moments, when a
   * write handed to the thread pool would not be finished before the process ends.
   */
  syncFromNow?(): void
  /**
   * Hears how many bytes of what was handed on the target has written, in order (sonic-boom's
   * 'write' event). A batch whose bytes are all written is reused; without this hook, or for bytes
   * never reported (a failed write, a flushSync), every batch gets a buffer of its own.
   */
  onWritten?(listener: (bytes: number) => void): void
}

/** Written batches kept for reuse: two or three are in flight at the rates a gateway logs. */
const SPARE_BATCHES = 4
/** Batches waiting for their bytes to be reported written, at most. */
const MAX_IN_FLIGHT = 16

export interface LineBatcherOptions {
  /** A batch is handed on once it holds this many bytes… */
  maxBytes: number
  /** …or once its oldest line has waited this long. */
  maxDelayMs: number
}

/** A UTF-16 code unit is at most 3 bytes of UTF-8 (a surrogate pair, two units, is 4). */
const MAX_UTF8_BYTES_PER_UNIT = 3

/**
 * Collects log lines and hands them to the target as one buffer per batch. Each line is
 * encoded into the batch's buffer as it is written, so the line's string dies young: kept as
 * strings until the batch was joined, a batch's ~200 lines (each a tree of concatenations)
 * were copied by every scavenge that met them, and the joined 64 KiB string was measured and
 * encoded again by sonic-boom. Encoding at once cost half as much CPU per line (docs/performance.md).
 * sonic-boom can buffer by itself (`minLength`), but it measures the whole pending buffer on every
 * write; here a line is one `Buffer#write`.
 */
export class LineBatcher {
  private batch: Buffer
  private used = 0
  private readonly timer: NodeJS.Timeout
  /** Bytes handed to the target so far, and how many of them it reported written. */
  private handedOn = 0
  private written = 0
  /** Batches handed on, oldest first, with the offset their last byte has in `handedOn`. */
  private readonly inFlight: { buffer: Buffer; end: number }[] = []
  private readonly spare: Buffer[] = []
  private readonly reuses: boolean

  constructor(
    private readonly target: BatchTarget,
    private readonly options: LineBatcherOptions
  ) {
    this.reuses = target.onWritten !== undefined
    target.onWritten?.((bytes) => this.onWritten(bytes))
    this.batch = this.newBatch()
    this.timer = setInterval(() => this.flush(), options.maxDelayMs)
    this.timer.unref()
  }

  write(line: string): boolean {
    // A line's length bounds its bytes; the exact count is needed only near the end of a batch.
    if (line.length * MAX_UTF8_BYTES_PER_UNIT > this.batch.length - this.used) {
      const bytes = Buffer.byteLength(line, 'utf8')
      if (bytes > this.batch.length - this.used) {
        this.flush()
        // A line longer than a whole batch goes on by itself, after the lines before it.
        if (bytes > this.batch.length) {
          this.handedOn += bytes
          if (!this.target.write(Buffer.from(line, 'utf8'))) this.handedOn -= bytes
          return true
        }
      }
    }
    this.used += this.batch.write(line, this.used, 'utf8')
    if (this.used >= this.options.maxBytes) this.flush()
    return true
  }

  /** Hands on what is collected now. */
  flush(): void {
    if (this.used === 0) return
    const buffer = this.batch
    const chunk = buffer.subarray(0, this.used)
    this.handedOn += this.used
    // The target holds the chunk until its write is done: the buffer comes back only once the
    // target says its bytes are written (onWritten), and the next batch gets another.
    if (this.reuses) {
      this.inFlight.push({ buffer, end: this.handedOn })
      // Writes that are never reported (a failing target) leave their batches to the collector.
      if (this.inFlight.length > MAX_IN_FLIGHT) this.inFlight.shift()
    }
    this.batch = this.newBatch()
    const used = this.used
    this.used = 0
    if (this.target.write(chunk)) return
    // Dropped: never reported written, so neither counted as handed on nor waited for.
    this.handedOn -= used
    if (this.reuses && this.inFlight.at(-1)?.buffer === buffer) this.inFlight.pop()
    if (this.spare.length < SPARE_BATCHES) this.spare.push(buffer)
  }

  /** Hands on and writes everything now, for the process's last moments. */
  flushSync(): void {
    // Handed on asynchronously, the last batch would be written after `flushSync` returned, or
    // never, if the process ended first (the 'exit' handler's case): a target idle until now
    // would start a thread-pool write for it that its own flushSync does not wait for.
    this.target.syncFromNow?.()
    this.flush()
    this.target.flushSync()
  }

  stop(): void {
    clearInterval(this.timer)
  }

  /**
   * Batches whose bytes the target has written are free again. A new buffer per batch (80 KiB
   * outside the heap, about 50 a second at 10,000 requests a second) cost about 2 % of a native
   * request (docs/performance.md).
   */
  private onWritten(bytes: number): void {
    this.written += bytes
    const inFlight = this.inFlight
    while (inFlight.length > 0 && (inFlight[0] as { end: number }).end <= this.written) {
      const { buffer } = inFlight.shift() as { buffer: Buffer }
      if (this.spare.length < SPARE_BATCHES) this.spare.push(buffer)
    }
  }

  /** Room for maxBytes and one more line of up to a quarter of that (an access line is ~350 bytes). */
  private newBatch(): Buffer {
    return this.spare.pop() ?? Buffer.allocUnsafeSlow(this.options.maxBytes + (this.options.maxBytes >> 2))
  }
}
