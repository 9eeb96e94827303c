import { describe, expect, it } from 'vitest'
import { createMetrics } from '../../../src/observability/metrics.js'

describe('v4gw_config_info (SPEC 17)', () => {
  it('is one series at 1 labelled with the running config hash, replaced when the hash changes', async () => {
    let hash = 'aaaaaaaaaaaa'
    const metrics = createMetrics({ sessionEntries: () => 0, configHash: () => hash, processMetrics: false })
    expect(await metrics.registry.metrics()).toMatch(/^v4gw_config_info\{hash="aaaaaaaaaaaa"\} 1$/m)
    hash = 'bbbbbbbbbbbb'
    const text = await metrics.registry.metrics()
    expect(text).toMatch(/^v4gw_config_info\{hash="bbbbbbbbbbbb"\} 1$/m)
    expect(text).not.toContain('aaaaaaaaaaaa')
  })
})

describe('v4gw_log_lines_dropped_total (SPEC 10: a log reader that falls behind costs lines, counted)', () => {
  it('counts what the destination reports dropped, as a counter', async () => {
    let dropped = 0
    const metrics = createMetrics({ sessionEntries: () => 0, processMetrics: false, logLinesDropped: () => dropped })
    expect(await metrics.registry.metrics()).toContain('v4gw_log_lines_dropped_total 0')
    dropped = 42
    const text = await metrics.registry.metrics()
    expect(text).toContain('# TYPE v4gw_log_lines_dropped_total counter')
    expect(text).toContain('v4gw_log_lines_dropped_total 42')
  })
})
