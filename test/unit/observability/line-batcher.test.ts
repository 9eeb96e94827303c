import { afterEach, describe, expect, it, vi } from 'vitest'
import { LineBatcher, type BatchTarget } from '../../../src/observability/line-batcher.js'

function recordingTarget(): BatchTarget & { writes: string[]; syncFlushes: number } {
  const target = {
    writes: [] as string[],
    syncFlushes: 0,
    write(chunk: string) {
      target.writes.push(chunk)
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

  it('hands lines on as one write once the batch reaches maxChars, in order', () => {
    const target = recordingTarget()
    batcher = new LineBatcher(target, { maxChars: 20, maxDelayMs: 60_000 })
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
    batcher = new LineBatcher(target, { maxChars: 10_000, maxDelayMs: 250 })
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
    batcher = new LineBatcher(target, { maxChars: 10_000, maxDelayMs: 60_000 })
    batcher.write('last words\n')
    batcher.flushSync()
    expect(target.writes).toEqual(['last words\n'])
    expect(target.syncFlushes).toBe(1)
  })
})
