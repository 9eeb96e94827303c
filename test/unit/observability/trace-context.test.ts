import { describe, expect, it } from 'vitest'
import { traceIdOf } from '../../../src/observability/trace-context.js'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT = '00f067aa0ba902b7'

describe('traceIdOf (W3C Trace Context 3.2)', () => {
  it.each([
    [`00-${TRACE}-${PARENT}-01`, 'version 00, sampled'],
    [`00-${TRACE}-${PARENT}-00`, 'version 00, not sampled'],
    [`00-${TRACE}-${PARENT}-ff`, 'unknown flags are kept, not refused'],
    [`01-${TRACE}-${PARENT}-01`, 'a later version of exactly 55 characters'],
    [`cc-${TRACE}-${PARENT}-01-what-the-future-holds`, 'a later version that goes on after a dash']
  ])('reads the trace id of %s (%s)', (traceparent) => {
    expect(traceIdOf(traceparent)).toBe(TRACE)
  })

  const invalid: [string | readonly string[] | undefined, string][] = [
    [undefined, 'absent'],
    ['', 'empty'],
    [`00-${'0'.repeat(32)}-${PARENT}-01`, 'an all-zero trace id'],
    [`00-${TRACE}-${'0'.repeat(16)}-01`, 'an all-zero parent id'],
    [`ff-${TRACE}-${PARENT}-01`, 'version ff'],
    [`00-${TRACE.toUpperCase()}-${PARENT}-01`, 'upper-case hex'],
    [`00-${TRACE}-${PARENT}-01-extra`, 'version 00 with more after it'],
    [`00-${TRACE}-${PARENT}-1`, 'a short flags field'],
    [`00-${TRACE.slice(1)}-${PARENT}-01`, 'a short trace id'],
    [`01-${TRACE}-${PARENT}-01x`, 'a later version that goes on without a dash'],
    [`00-${TRACE}-${PARENT}-01, 00-${TRACE}-${PARENT}-01`, 'two traceparent fields, joined by Node'],
    [`0g-${TRACE}-${PARENT}-01`, 'a version that is not hex'],
    [`00_${TRACE}_${PARENT}_01`, 'other separators'],
    [[`00-${TRACE}-${PARENT}-01`], 'an array']
  ]
  it.each(invalid)('refuses %s (%s)', (traceparent) => {
    expect(traceIdOf(traceparent)).toBeUndefined()
  })
})
