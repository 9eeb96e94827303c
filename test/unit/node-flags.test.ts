import { describe, expect, it } from 'vitest'
import { missingProductionFlags, PRODUCTION_NODE_FLAGS } from '../../src/node-flags.js'

describe('missingProductionFlags', () => {
  it('asks for every flag of a plain start', () => {
    expect(missingProductionFlags([], undefined)).toEqual(PRODUCTION_NODE_FLAGS)
  })

  it('asks for none when all are on the command line, whatever else is', () => {
    expect(missingProductionFlags(['--enable-source-maps', ...PRODUCTION_NODE_FLAGS], '')).toEqual([])
  })

  it('counts a flag set to another value, by either spelling, or in NODE_OPTIONS, as the operator’s choice', () => {
    expect(missingProductionFlags(['--max_semi_space_size=8', '--allocation-site-pretenuring'], ' --initial-old-space-size=512  --inspect')).toEqual([])
  })

  it('asks only for what is missing', () => {
    expect(missingProductionFlags(['--max-semi-space-size=64'], undefined)).toEqual(['--initial-old-space-size=128', '--no-allocation-site-pretenuring'])
  })
})
