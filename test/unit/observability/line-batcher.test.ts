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
})
