/** Where a batch goes: sonic-boom (pino.destination) in production. */
export interface BatchTarget {
  write(chunk: string): boolean
  flushSync(): void
}

export interface LineBatcherOptions {
  /** A batch is handed on once it holds this many characters… */
  maxChars: number
  /** …or once its oldest line has waited this long. */
  maxDelayMs: number
}

/**
 * Collects log lines and hands them to the target as one string per batch. sonic-boom can
 * buffer by itself (`minLength`), but it measures the whole pending buffer on every write
 * (`Buffer.byteLength` of a 12 KiB string per log line), which cost more than the line itself;
 * here a line is one array push.
 */
export class LineBatcher {
  private lines: string[] = []
  private chars = 0
  private readonly timer: NodeJS.Timeout

  constructor(
    private readonly target: BatchTarget,
    private readonly options: LineBatcherOptions
  ) {
    this.timer = setInterval(() => this.flush(), options.maxDelayMs)
    this.timer.unref()
  }

  write(line: string): boolean {
    this.lines.push(line)
    this.chars += line.length
    if (this.chars >= this.options.maxChars) this.flush()
    return true
  }

  /** Hands on what is collected now. */
  flush(): void {
    if (this.lines.length === 0) return
    const batch = this.lines.length === 1 ? (this.lines[0] as string) : this.lines.join('')
    this.lines = []
    this.chars = 0
    this.target.write(batch)
  }

  /** Hands on and writes everything now, for the process's last moments. */
  flushSync(): void {
    this.flush()
    this.target.flushSync()
  }

  stop(): void {
    clearInterval(this.timer)
  }
}
