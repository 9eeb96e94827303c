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
