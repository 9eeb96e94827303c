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
    // About 75 pools of random bytes: ids that end a pool are whole ids too.
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
