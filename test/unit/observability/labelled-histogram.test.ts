import { Histogram, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { LabelledHistogram } from '../../../src/observability/labelled-histogram.js'

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

describe('LabelledHistogram', () => {
  it('renders exactly what prom-client’s own Histogram renders for the same observations', async () => {
    const theirs = new Registry()
    const reference = new Histogram({ name: 'x_seconds', help: 'help text', labelNames: ['class'] as const, buckets: BUCKETS, registers: [theirs] })
    const ours = new Registry()
    const histogram = new LabelledHistogram('x_seconds', 'help text', 'class', BUCKETS, ours)
    // On bounds, between them, past the last, zero, and for three label values.
    const samples: [string, number][] = [['native', 0], ['native', 0.001], ['native', 0.0011], ['legacy', 0.025], ['legacy', 31], ['native', 10], ['unknown', 0.3], ['legacy', 0.0025]]
    for (const [label, value] of samples) {
      reference.observe({ class: label }, value)
      histogram.observe(label, value)
    }
    expect(await ours.metrics()).toBe(await theirs.metrics())
  })

  it('forgets its series on reset, as registry.resetMetrics() asks', async () => {
    const registry = new Registry()
    const histogram = new LabelledHistogram('y_seconds', 'help', 'class', BUCKETS, registry)
    histogram.observe('native', 0.2)
    registry.resetMetrics()
    expect(await registry.metrics()).toBe('# HELP y_seconds help\n# TYPE y_seconds histogram\n')
  })
})
