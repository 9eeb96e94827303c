import { afterEach, describe, expect, it, vi } from 'vitest'
import { LineBatcher, type BatchTarget } from '../../../src/observability/line-batcher.js'

/** Keeps each chunk as handed on (not a copy), so a batcher that wrote into a chunk later would show. */
function recordingTarget(): BatchTarget & { chunks: Buffer[]; writes: string[]; syncFlushes: number } {
  const target = {
    chunks: [] as Buffer[],
    get writes(): string[] {
      return target.chunks.map((chunk) => chunk.toString('utf8'))
    },
    syncFlushes: 0,
    write(chunk: Buffer) {
      target.chunks.push(chunk)
      return true
    },
    flushSync() {
      target.syncFlushes++
    }
  }
  return target
}

describe('LineBatcher', () => {
  let batcher: LineBatcher | undefined
  afterEach(() => {
    batcher?.stop()
    vi.useRealTimers()
  })

  it('hands lines on as one write once the batch reaches maxBytes, in order', () => {
    const target = recordingTarget()
    batcher = new LineBatcher(target, { maxBytes: 20, maxDelayMs: 60_000 })
    batcher.write('{"a":1}\n')
    batcher.write('{"b":2}\n')
    expect(target.writes).toEqual([])
    batcher.write('{"c":3}\n')
    expect(target.writes).toEqual(['{"a":1}\n{"b":2}\n{"c":3}\n'])
    batcher.write('{"d":4}\n')
    expect(target.writes).toHaveLength(1)
  })

  it('hands a partial batch on after maxDelayMs', () => {
    vi.useFakeTimers()
    const target = recordingTarget()
    batcher = new LineBatcher(target, { maxBytes: 10_000, maxDelayMs: 250 })
    batcher.write('one\n')
    vi.advanceTimersByTime(249)
    expect(target.writes).toEqual([])
    vi.advanceTimersByTime(1)
    expect(target.writes).toEqual(['one\n'])
    vi.advanceTimersByTime(1_000)
    expect(target.writes).toEqual(['one\n'])
  })

  it('flushSync hands on what is pending and flushes the target synchronously', () => {
    const target = recordingTarget()
    batcher = new LineBatcher(target, { maxBytes: 10_000, maxDelayMs: 60_000 })
    batcher.write('last words\n')
    batcher.flushSync()
    expect(target.writes).toEqual(['last words\n'])
    expect(target.syncFlushes).toBe(1)
  })

  it('encodes each line as UTF-8 and counts its bytes, not its characters', () => {
    const target = recordingTarget()
    batcher = new LineBatcher(target, { maxBytes: 20, maxDelayMs: 60_000 })
    // 7 UTF-16 units, 12 bytes: é is 2 bytes, 😀 (a surrogate pair) 4, € 3.
    batcher.write('é😀€ab\n')
    expect(target.writes).toEqual([])
    batcher.write('{"ü":1}\n')
    expect(target.writes).toEqual(['é😀€ab\n{"ü":1}\n'])
    expect(target.chunks[0]?.length).toBe(12 + 9)
  })

  it('hands a line longer than a batch on by itself, after the lines before it', () => {
    const target = recordingTarget()
    batcher = new LineBatcher(target, { maxBytes: 20, maxDelayMs: 60_000 })
    batcher.write('a\n')
    const long = `${'x'.repeat(200)}\n`
    batcher.write(long)
    batcher.write('b\n')
    batcher.flush()
    expect(target.writes).toEqual(['a\n', long, 'b\n'])
  })

  it('never writes into a chunk it has handed on (the target may still be writing it)', () => {
    const target = recordingTarget()
    batcher = new LineBatcher(target, { maxBytes: 20, maxDelayMs: 60_000 })
    batcher.write('first batch line\n!\n')
    batcher.write('second batch line\n')
    batcher.write('third\n')
    batcher.write('fourth\n')
    batcher.flush()
    expect(target.writes).toEqual(['first batch line\n!\n', 'second batch line\nthird\n', 'fourth\n'])
  })

  it('reuses a batch only once the target reports all its bytes written, and never a chunk still being written', () => {
    const target = recordingTarget()
    let report: (bytes: number) => void = () => undefined
    target.onWritten = (listener) => {
      report = listener
    }
    batcher = new LineBatcher(target, { maxBytes: 20, maxDelayMs: 60_000 })
    const lines = Array.from({ length: 12 }, (_, index) => `line number ${String(index).padStart(2, '0')} padded\n`)
    // Each line fills a batch: twelve chunks, none reported written yet.
    for (const line of lines) batcher.write(line)
    const snapshot = target.chunks.map((chunk) => chunk.toString('utf8'))
    expect(snapshot).toEqual(lines)
    expect(new Set(target.chunks.map((chunk) => chunk.buffer)).size).toBe(12)
    // The first two chunks written, and half of the third: only the first two come back.
    report(lines[0]!.length + lines[1]!.length + 5)
    for (const line of ['again a line 1\n!!!!\n', 'again a line 2\n!!!!\n', 'again a line 3\n!!!!\n']) batcher.write(line)
    // What was handed on and not reported written is intact.
    expect(target.chunks.slice(2, 12).map((chunk) => chunk.toString('utf8'))).toEqual(lines.slice(2))
    const reused = target.chunks.slice(12).map((chunk) => target.chunks.slice(0, 2).some((first) => first.buffer === chunk.buffer))
    // The batch being filled when the report came was already a new one; the two after it are the freed ones.
    expect(reused).toEqual([false, true, true])
    expect(target.writes.slice(12)).toEqual(['again a line 1\n!!!!\n', 'again a line 2\n!!!!\n', 'again a line 3\n!!!!\n'])
  })

  // The target drops a chunk when its reader is too far behind (logger.ts): a dropped chunk is never
  // reported written, so counting it as handed on held every later batch back from reuse.
  it('takes back a batch the target dropped at once, and reuses the later ones as their bytes are reported', () => {
    const target = recordingTarget()
    let report: (bytes: number) => void = () => undefined
    target.onWritten = (listener) => {
      report = listener
    }
    let dropNext = true
    const write = target.write.bind(target)
    target.write = (chunk) => {
      write(chunk)
      const taken = !dropNext
      dropNext = false
      return taken
    }
    batcher = new LineBatcher(target, { maxBytes: 20, maxDelayMs: 60_000 })
    batcher.write('dropped line 000000\n')
    batcher.write('written line 111111\n')
    // The written one is reported: its buffer is free too.
    report('written line 111111\n'.length)
    batcher.write('another line 222222\n')
    batcher.write('one more line 33333\n')
    // The dropped chunk's buffer came back at once (the batch after next, a new one being filled
    // already); the written one's once reported.
    expect(target.chunks[2]!.buffer).toBe(target.chunks[0]!.buffer)
    expect(target.chunks[3]!.buffer).toBe(target.chunks[1]!.buffer)
  })

  it('gives every batch a buffer of its own when the target reports nothing written', () => {
    const target = recordingTarget()
    target.onWritten = () => undefined
    batcher = new LineBatcher(target, { maxBytes: 20, maxDelayMs: 60_000 })
    for (let index = 0; index < 40; index++) batcher.write(`a line that fills ${String(index).padStart(2, '0')}\n`)
    expect(new Set(target.chunks.map((chunk) => chunk.buffer)).size).toBe(40)
    expect(target.writes[39]).toBe('a line that fills 39\n')
  })
})
