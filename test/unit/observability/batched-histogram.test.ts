import { Histogram, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { batchedHistogram, OBSERVATION_BATCH } from '../../../src/observability/batched-histogram.js'

/*
 * The latency histograms observe through batches for speed (observability/batched-histogram.ts):
 * held to a prom-client Histogram that observes each value at once, exposition for exposition.
 */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
const CLASSES = ['native', 'legacy', 'unknown']

function pair(): { batched: (value: string) => { observe(value: number): void }; direct: Histogram<'class'>; batchedRegistry: Registry; directRegistry: Registry } {
  const batchedRegistry = new Registry()
  const directRegistry = new Registry()
  const batched = batchedHistogram({ name: 'v4gw_request_duration_seconds', help: 'h', label: 'class', buckets: BUCKETS, registry: batchedRegistry })
  const direct = new Histogram({ name: 'v4gw_request_duration_seconds', help: 'h', labelNames: ['class'] as const, buckets: BUCKETS, registers: [directRegistry] })
  return { batched, direct, batchedRegistry, directRegistry }
}

/** A deterministic stream of values: bucket bounds exactly, zero, fractions, beyond the last bucket. */
function* values(count: number): Generator<[string, number]> {
  let seed = 7
  const next = (): number => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
    return seed / 2 ** 31
  }
  for (let index = 0; index < count; index++) {
    const pick = next()
    const value = pick < 0.2 ? (BUCKETS[Math.floor(next() * BUCKETS.length)] as number) : pick < 0.25 ? 0 : pick < 0.3 ? 31 + next() * 100 : next() * next() * 2
    yield [CLASSES[Math.floor(next() * CLASSES.length)] as string, value]
  }
}

describe('a batched histogram', () => {
  it('scrapes as a histogram observed value by value, with scrapes between batches and within them', async () => {
    const { batched, direct, batchedRegistry, directRegistry } = pair()
    let observed = 0
    for (const [trafficClass, value] of values(10_000)) {
      batched(trafficClass).observe(value)
      direct.labels({ class: trafficClass }).observe(value)
      // Scrapes at uneven points: mid-batch, at a batch's end, right after one.
      if (++observed % 997 === 0 || observed === OBSERVATION_BATCH || observed === OBSERVATION_BATCH + 1) {
        expect(await batchedRegistry.metrics()).toBe(await directRegistry.metrics())
      }
    }
    expect(await batchedRegistry.metrics()).toBe(await directRegistry.metrics())
    // get() reads it too (the JSON form), flushed the same way.
    expect(await batchedRegistry.getMetricsAsJSON()).toEqual(await directRegistry.getMetricsAsJSON())
  })

  it('shows an observation in the next scrape, though its batch is not full', async () => {
    const { batched, batchedRegistry } = pair()
    batched('native').observe(0.02)
    expect(await batchedRegistry.metrics()).toContain('v4gw_request_duration_seconds_count{class="native"} 1')
    expect(await batchedRegistry.metrics()).toContain('v4gw_request_duration_seconds_sum{class="native"} 0.02')
  })

  it('refuses a value that is not a finite number as it is observed, and keeps the others', async () => {
    const { batched, direct, batchedRegistry, directRegistry } = pair()
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(() => batched('native').observe(bad)).toThrow(TypeError)
      expect(() => direct.labels({ class: 'native' }).observe(bad)).toThrow(TypeError)
    }
    batched('native').observe(0.5)
    direct.labels({ class: 'native' }).observe(0.5)
    expect(await batchedRegistry.metrics()).toBe(await directRegistry.metrics())
  })
})
