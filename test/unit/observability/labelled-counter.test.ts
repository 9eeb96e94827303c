import { Counter, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { LabelledCounter } from '../../../src/observability/labelled-counter.js'

describe('LabelledCounter', () => {
  it('renders exactly what prom-client’s own Counter renders for the same increments', async () => {
    const theirs = new Registry()
    const reference = new Counter({ name: 'x_total', help: 'help text', labelNames: ['tenant', 'class', 'status_class'] as const, registers: [theirs] })
    const ours = new Registry()
    const counter = new LabelledCounter('x_total', 'help text', ours)
    // Repeated sets, a fresh one between them, and label values the exposition has to escape.
    const increments = [
      { tenant: 'acme', class: 'legacy', status_class: '2xx' },
      { tenant: 'acme', class: 'native', status_class: '5xx' },
      { tenant: 'acme', class: 'legacy', status_class: '2xx' },
      { tenant: '', class: 'unknown', status_class: '4xx' },
      { tenant: 'we"ird\\name\nx', class: 'legacy', status_class: '2xx' },
      { tenant: 'acme', class: 'legacy', status_class: '2xx' }
    ]
    for (const labels of increments) {
      reference.inc(labels)
      counter.inc(`${labels.tenant}\u0000${labels.class}\u0000${labels.status_class}`, () => ({ ...labels }))
    }
    expect(await ours.metrics()).toBe(await theirs.metrics())
    expect(await ours.metrics()).toContain('x_total{tenant="acme",class="legacy",status_class="2xx"} 3')
  })

  it('renders no series before its first increment, as prom-client does for a labelled counter', async () => {
    const theirs = new Registry()
    new Counter({ name: 'y_total', help: 'help', labelNames: ['event'] as const, registers: [theirs] })
    const ours = new Registry()
    new LabelledCounter('y_total', 'help', ours)
    expect(await ours.metrics()).toBe(await theirs.metrics())
  })

  it('forgets its series on reset, as registry.resetMetrics() asks', async () => {
    const registry = new Registry()
    const counter = new LabelledCounter('z_total', 'help', registry)
    counter.inc('hit', () => ({ event: 'hit' }))
    registry.resetMetrics()
    expect(await registry.metrics()).toBe('# HELP z_total help\n# TYPE z_total counter\n')
  })
})
