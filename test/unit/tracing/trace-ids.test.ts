import { isValidSpanId, isValidTraceId, ROOT_CONTEXT, SamplingDecision } from '@opentelemetry/api'
import { RandomIdGenerator, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base'
import { describe, expect, it } from 'vitest'
import { ratioBound, TraceIds } from '../../../src/tracing/trace-ids.js'

/*
 * tracing/trace-ids.ts replaces the SDK's RandomIdGenerator and TraceIdRatioBasedSampler for
 * speed; held here to them: ids as the SDK's are (W3C Trace Context 3.2.2.3, 3.2.2.4: lowercase
 * hex, 32 and 16 characters, not all zero), and the same sampling decision on every trace id.
 */
const sdk = new RandomIdGenerator()
const LOWER_HEX = /^[0-9a-f]+$/

describe('trace and span ids', () => {
  it('are lowercase hex of the SDK ids’ lengths, valid, and distinct across many pools', () => {
    const ids = new TraceIds()
    // Three pools of random bytes and about 750 windows of hex: ids at a window's or a pool's end are whole too.
    const traceIds = Array.from({ length: 6_000 }, (_, index) => ids.root(ratioBound(index % 2 === 0 ? 0 : 1)).traceId)
    const spanIds = Array.from({ length: 12_000 }, (_, index) => (index % 2 === 0 ? ids.spanId() : ids.keptSpanId()))
    for (const id of traceIds) {
      expect(id).toHaveLength(sdk.generateTraceId().length)
      expect(id).toMatch(LOWER_HEX)
      expect(isValidTraceId(id)).toBe(true)
    }
    for (const id of spanIds) {
      expect(id).toHaveLength(sdk.generateSpanId().length)
      expect(id).toMatch(LOWER_HEX)
      expect(isValidSpanId(id)).toBe(true)
    }
    expect(new Set(traceIds).size).toBe(traceIds.length)
    expect(new Set(spanIds).size).toBe(spanIds.length)
  })

  it('are random in every position (not a counter), and two pools differ', () => {
    const ids = new TraceIds()
    const seen = Array.from({ length: 32 }, () => new Set<string>())
    for (let index = 0; index < 2_000; index++) [...ids.root(0).traceId].forEach((digit, position) => seen[position]?.add(digit))
    // One of 16 digits missing from one of 32 positions in 2,000 draws: about 512 × (15/16)^2000, nil.
    expect(seen.map((digits) => digits.size)).toEqual(Array.from({ length: 32 }, () => 16))
    expect(new TraceIds().spanId()).not.toBe(new TraceIds().spanId())
  })
})

describe('ids from given bytes', () => {
  /** Every pool drawn gets `bytes` at its start and random bytes after. */
  const poolsStartingWith = (bytes: number[]) => (pool: Buffer) => {
    pool.fill(0x5a)
    Buffer.from(bytes).copy(pool)
  }

  it('skip bytes that would make an all-zero id (W3C: invalid)', () => {
    const ids = new TraceIds(poolsStartingWith([...new Array<number>(16).fill(0), ...new Array<number>(16).fill(0xab)]))
    expect(ids.root(0).traceId).toBe('ab'.repeat(16))
    const spans = new TraceIds(poolsStartingWith([...new Array<number>(8).fill(0), 1, 2, 3, 4, 5, 6, 7, 8]))
    expect(spans.spanId()).toBe('0102030405060708')
  })

  it('sample a root only below the bound: the words XORed equal to it are not sampled', () => {
    // The four words of each of the first two trace ids XOR to 5.
    const five = [0, 0, 0, 7, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0]
    const ids = new TraceIds(poolsStartingWith([...five, ...five]))
    expect(ids.root(5)).toEqual({ traceId: '00000007000000020000000000000000', sampled: false })
    expect(ids.root(6)).toEqual({ traceId: '00000007000000020000000000000000', sampled: true })
  })

  it('the bound is the SDK sampler’s for every ratio, edge cases included', () => {
    for (const ratio of [0, 1e-9, 0.01, 0.5, 0.999, 1, -1, Number.NaN, 2, Number.POSITIVE_INFINITY]) {
      const sdkBound = (new TraceIdRatioBasedSampler(ratio) as unknown as { _upperBound: number })._upperBound
      expect(ratioBound(ratio)).toBe(sdkBound)
    }
  })
})

describe('the ratio decision on a new root', () => {
  it('is TraceIdRatioBasedSampler’s on the same trace id, at every ratio', () => {
    const ids = new TraceIds()
    for (const ratio of [0, 1e-9, 0.001, 0.01, 0.25, 0.5, 0.999, 1, -1, Number.NaN, 2]) {
      const sdkSampler = new TraceIdRatioBasedSampler(ratio)
      let sampled = 0
      for (let index = 0; index < 5_000; index++) {
        const root = ids.root(ratioBound(ratio))
        expect(root.sampled).toBe(sdkSampler.shouldSample(ROOT_CONTEXT, root.traceId).decision === SamplingDecision.RECORD_AND_SAMPLED)
        if (root.sampled) sampled++
      }
      // And it samples: about the ratio of 5,000 (binomial; 0.25: 1,250 ± 31, outside ±300 never).
      if (ratio === 0.25) expect(Math.abs(sampled - 1_250)).toBeLessThan(300)
      if (ratio >= 1) expect(sampled).toBe(5_000)
      if (!(ratio > 0)) expect(sampled).toBe(0)
    }
  })
})
