import { randomUUID } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { isValidRequestId, randomRequestUuid, resolveRequestId } from '../../../src/observability/request-id.js'

/** RFC 9562 5.4: a version-4 UUID in its lower-case text form, as `crypto.randomUUID()` writes it. */
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe('randomRequestUuid, against crypto.randomUUID', () => {
  it("has randomUUID's form: lower-case hex, version 4, variant 10, the dashes where its are", () => {
    // The contract itself is read off the library: every randomUUID matches it too.
    for (let index = 0; index < 1_000; index++) expect(randomUUID()).toMatch(UUID_V4)
    for (let index = 0; index < 5_000; index++) expect(randomRequestUuid()).toMatch(UUID_V4)
  })

  it('is a flat string of 36 characters, each made anew', () => {
    const [one, two] = [randomRequestUuid(), randomRequestUuid()]
    expect(one).toHaveLength(36)
    expect(one).not.toBe(two)
  })

  it('never repeats across several fills of its random pool', () => {
    const seen = new Set<string>()
    for (let index = 0; index < 20_000; index++) seen.add(randomRequestUuid())
    expect(seen.size).toBe(20_000)
  })

  it('takes fresh random bytes for every id: no run of five unaltered bytes appears in two ids', () => {
    // Bytes 6 and 8 carry the version and variant bits; any other five in a row come straight from
    // the pool. Ids that overlapped in the pool would share such a run (40 random bits: two
    // unrelated ids share one about once in a trillion comparisons).
    const seen = new Set<string>()
    for (let index = 0; index < 1_000; index++) {
      const bytes = Buffer.from(randomRequestUuid().replaceAll('-', ''), 'hex')
      for (let start = 0; start + 5 <= 16; start++) {
        if (start <= 6 && start + 5 > 6) continue
        if (start <= 8 && start + 5 > 8) continue
        const run = bytes.subarray(start, start + 5).toString('hex')
        expect(seen.has(run), `a run of bytes seen before: ${run}`).toBe(false)
        seen.add(run)
      }
    }
  })

  it('uses every random bit but the six fixed ones: each free hex digit takes all sixteen values', () => {
    const digits = Array.from({ length: 36 }, () => new Set<string>())
    for (let index = 0; index < 4_000; index++) [...randomRequestUuid()].forEach((char, at) => digits[at]?.add(char))
    digits.forEach((values, at) => {
      if ([8, 13, 18, 23].includes(at)) expect([...values]).toEqual(['-'])
      else if (at === 14) expect([...values]).toEqual(['4'])
      else if (at === 19) expect([...values].sort()).toEqual(['8', '9', 'a', 'b'])
      else expect(values.size).toBe(16)
    })
  })
})

describe('resolveRequestId (SPEC 6)', () => {
  it('keeps a valid incoming id and makes a UUID for anything else', () => {
    expect(resolveRequestId('client-id.1:2')).toBe('client-id.1:2')
    for (const incoming of [undefined, '', 'has space', 'x'.repeat(129), ['a', 'b']]) {
      expect(isValidRequestId(incoming)).toBe(false)
      expect(resolveRequestId(incoming)).toMatch(UUID_V4)
    }
  })
})
