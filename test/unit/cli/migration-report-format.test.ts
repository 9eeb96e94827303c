import { describe, expect, it } from 'vitest'
import { foldLine, formatCalendarMarkdown } from '../../../src/brownout-calendar.js'
import { csvCell, formatMarkdown, type MigrationAnswer } from '../../../src/migration-report-format.js'

describe("v4gw report's formats (SPEC 12)", () => {
  it("prefixes with ' every CSV cell that a spreadsheet would read as a formula, and quotes per RFC 4180", () => {
    expect(['=1+1', '+1', '-1', '@A1', '\tx', '\rx'].map(csvCell)).toEqual(["'=1+1", "'+1", "'-1", "'@A1", "'\tx", `"'\rx"`])
    expect(csvCell('a,b')).toBe('"a,b"')
    expect(csvCell('say "hi"')).toBe('"say ""hi"""')
    expect(csvCell(null)).toBe('')
    expect(csvCell(42)).toBe('42')
  })

  it('keeps a client-sent user agent inside its Markdown cell: no | that ends it, no line break, no link', () => {
    const answer: MigrationAnswer = {
      schemaVersion: 2,
      generatedAt: '2026-11-27T08:00:00.000Z',
      scope: 'fleet',
      configHashes: ['abc'],
      tenants: {
        acme: {
          since: '2026-11-01T00:00:00.000Z',
          stage: 'translate',
          legacyShare: [],
          brownoutPause: null,
          routes: {
            'POST /v1/x': {
              stage: 'translate',
              requests: 1,
              lastSeen: '2026-11-27T07:59:00.000Z',
              lastSeenNonExempt: '2026-11-27T07:59:00.000Z',
              distinctClients: 1,
              clientsListed: 1,
              clientsEvicted: 0,
              deprecation: null,
              clients: [{ clientId: 'hdr:a', label: null, owner: null, userAgent: 'x | y\n## [click](http://evil.example) see https://evil.example, WWW.evil.example, _www.evil.example or ops@evil.example', requests: 1, firstSeen: '2026-11-27T07:59:00.000Z', lastSeen: '2026-11-27T07:59:00.000Z', lastBrownout: null, exemptUntil: null }]
            }
          }
        }
      }
    }
    const row = formatMarkdown(answer)
      .split('\n')
      .find((line) => line.startsWith('| hdr:a'))
    // GFM would link a bare URL, a www. name and an address: each is broken by an escape that renders as nothing.
    expect(row).toContain('x \\| y ## \\[click\\](http\\://evil.example) see https\\://evil.example, WWW\\.evil.example, \\_www\\.evil.example or ops\\@evil.example')
    expect(row?.split(/(?<!\\)\|/)).toHaveLength(10)
  })

  it('writes a calendar table\'s instants to the minute, and to the second (or millisecond) when they have one', () => {
    const at = (iso: string): number => Date.parse(iso)
    const table = formatCalendarMarkdown([
      { tenant: 'acme', route: 'POST /v1/x', kind: 'brownout', startMs: at('2027-03-02T14:00:00Z'), endMs: at('2027-03-02T14:00:30Z'), detail: '10 % of clients' },
      { tenant: 'acme', route: 'POST /v1/x', kind: 'sunset', startMs: at('2027-06-01T00:00:00.250Z'), endMs: null, detail: 'gone' }
    ])
    expect(table).toContain('| 2027-03-02 14:00 UTC | 2027-03-02 14:00:30 UTC |')
    expect(table).toContain('| 2027-06-01 00:00:00.250 UTC | – |')
  })

  it('folds iCalendar lines at 75 octets without splitting a UTF-8 character', () => {
    const folded = foldLine(`SUMMARY:${'é'.repeat(80)}`)
    const lines = folded.split('\r\n')
    for (const line of lines) expect(Buffer.byteLength(line)).toBeLessThanOrEqual(75)
    expect(lines.slice(1).every((line) => line.startsWith(' '))).toBe(true)
    expect(lines.map((line, index) => (index === 0 ? line : line.slice(1))).join('')).toBe(`SUMMARY:${'é'.repeat(80)}`)
  })
})
