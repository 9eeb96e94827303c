import { describe, expect, it } from 'vitest'
import { formatIcs, type CalendarEvent } from '../../../src/brownout-calendar.js'

const START = Date.UTC(2027, 2, 2, 14)

function event(route: string | null): CalendarEvent {
  return { tenant: 'acme', route, kind: 'brownout', startMs: START, endMs: START + 3_600_000, detail: '25 %' }
}

function uids(ics: string): string[] {
  return ics
    .replace(/\r\n /g, '')
    .split('\r\n')
    .filter((line) => line.startsWith('UID:'))
}

describe('v4gw calendar’s UIDs (RFC 5545 3.8.4.7: one per event)', () => {
  it('differ for routes that differ only in punctuation, and for the tenant-wide event', () => {
    const found = uids(formatIcs([event('POST /v1/a.b'), event('POST /v1/a-b'), event(null)], START))
    expect(new Set(found).size).toBe(3)
  })

  it('are the same in two runs, so a calendar updates rather than duplicates', () => {
    expect(uids(formatIcs([event('POST /v1/a.b')], START))).toEqual(uids(formatIcs([event('POST /v1/a.b')], START + 86_400_000)))
  })
})
