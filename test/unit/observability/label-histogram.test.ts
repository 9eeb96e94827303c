import { Histogram, Registry, type RegistryContentType } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { labelHistogram } from '../../../src/observability/label-histogram.js'

/*
 * The latency histograms are counted by the gateway for speed (observability/label-histogram.ts):
 * a contract test against a prom-client Histogram fed the same values, exposition for exposition.
 */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
const CLASSES = ['native', 'legacy', 'unknown']

function pair(): { own: (value: string) => { observe(value: number): void }; direct: Histogram<'class'>; ownRegistry: Registry<RegistryContentType>; directRegistry: Registry<RegistryContentType> } {
  const ownRegistry = new Registry<RegistryContentType>()
  const directRegistry = new Registry<RegistryContentType>()
  const own = labelHistogram({ name: 'v4gw_request_duration_seconds', help: 'h', label: 'class', buckets: BUCKETS, registry: ownRegistry })
  const direct = new Histogram({ name: 'v4gw_request_duration_seconds', help: 'h', labelNames: ['class'] as const, buckets: BUCKETS, registers: [directRegistry] })
  return { own, direct, ownRegistry, directRegistry }
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

describe('a histogram counted by the gateway', () => {
  it('scrapes as a prom-client Histogram fed the same values, at every point of the stream', async () => {
    const { own, direct, ownRegistry, directRegistry } = pair()
    expect(await ownRegistry.metrics()).toBe(await directRegistry.metrics())
    let observed = 0
    for (const [trafficClass, value] of values(10_000)) {
      own(trafficClass).observe(value)
      direct.labels({ class: trafficClass }).observe(value)
      if (++observed % 997 === 0 || observed < 4) expect(await ownRegistry.metrics()).toBe(await directRegistry.metrics())
    }
    expect(await ownRegistry.metrics()).toBe(await directRegistry.metrics())
    // get() reads it too (the JSON form).
    expect(await ownRegistry.getMetricsAsJSON()).toEqual(await directRegistry.getMetricsAsJSON())
  })

  it('shows a series once it is observed, not before, and after a reset only once observed again', async () => {
    const { own, direct, ownRegistry, directRegistry } = pair()
    own('native')
    direct.labels({ class: 'native' })
    expect(await ownRegistry.metrics()).toBe(await directRegistry.metrics())
    expect(await ownRegistry.metrics()).not.toContain('class="native"')
    for (const [trafficClass, value] of values(300)) {
      own(trafficClass).observe(value)
      direct.labels({ class: trafficClass }).observe(value)
    }
    ownRegistry.resetMetrics()
    directRegistry.resetMetrics()
    expect(await ownRegistry.metrics()).toBe(await directRegistry.metrics())
    // After a reset the series come back in the order they are observed again, not as first made.
    for (const trafficClass of ['unknown', 'legacy', 'native']) {
      own(trafficClass).observe(0.003)
      direct.labels({ class: trafficClass }).observe(0.003)
    }
    expect(await ownRegistry.metrics()).toBe(await directRegistry.metrics())
    expect(await ownRegistry.metrics()).toContain('v4gw_request_duration_seconds_count{class="legacy"} 1')
    expect(await ownRegistry.getMetricsAsJSON()).toEqual(await directRegistry.getMetricsAsJSON())
  })

  it('scrapes the same with default labels and in the OpenMetrics format', async () => {
    const { own, direct, ownRegistry, directRegistry } = pair()
    for (const [trafficClass, value] of values(500)) {
      own(trafficClass).observe(value)
      direct.labels({ class: trafficClass }).observe(value)
    }
    for (const registry of [ownRegistry, directRegistry]) registry.setDefaultLabels({ replica: 'gw-1' })
    expect(await ownRegistry.metrics()).toBe(await directRegistry.metrics())
    expect(await ownRegistry.metrics()).toContain('v4gw_request_duration_seconds_bucket{le="0.001",replica="gw-1",class="native"}')
    expect(await ownRegistry.getMetricsAsJSON()).toEqual(await directRegistry.getMetricsAsJSON())
    for (const registry of [ownRegistry, directRegistry]) registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE)
    expect(await ownRegistry.metrics()).toBe(await directRegistry.metrics())
  })

  it('refuses a value that is not a finite number as it is observed, and keeps the others', async () => {
    const { own, direct, ownRegistry, directRegistry } = pair()
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(() => own('native').observe(bad)).toThrow(new TypeError(`Value is not a valid number: ${bad}`))
      expect(() => direct.labels({ class: 'native' }).observe(bad)).toThrow(new TypeError(`Value is not a valid number: ${bad}`))
    }
    own('native').observe(0.5)
    direct.labels({ class: 'native' }).observe(0.5)
    expect(await ownRegistry.metrics()).toBe(await directRegistry.metrics())
  })

  it('is refused by a registry that already has a metric of its name, as prom-client refuses one', () => {
    const { ownRegistry } = pair()
    expect(() => new Histogram({ name: 'v4gw_request_duration_seconds', help: 'h', registers: [ownRegistry] })).toThrow(/already been registered/)
  })
})
