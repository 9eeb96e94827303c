import { describe, expect, it } from 'vitest'
import { hasCompleteMeta } from '../../../src/legacy/complete-meta.js'

/**
 * What the parsed path decides (SPEC 6), written independently of the scan: true when the
 * answer would go out as it came (not JSON, not an object, or nothing of meta to fill in).
 */
function goesOutAsItCame(text: string, needsSessionId: boolean): boolean {
  let document: unknown
  try {
    document = JSON.parse(text)
  } catch {
    return true
  }
  const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value)
  if (!isObject(document)) return true
  const meta = document.meta
  if (meta === undefined) return false
  if (!isObject(meta)) return true
  if (meta.requestId === undefined || meta.timingMs === undefined) return false
  if (isObject(meta.timingMs) && meta.timingMs.total === undefined) return false
  return !(needsSessionId && meta.sessionId === undefined)
}

function complete(text: string, needsSessionId = false): boolean {
  const verdict = hasCompleteMeta(Buffer.from(text), needsSessionId)
  // The one promise the scan makes: when it says complete, parsing would have changed nothing.
  if (verdict) expect(goesOutAsItCame(text, needsSessionId)).toBe(true)
  return verdict
}

const FULL_META = { requestId: 'req_1', executionId: 'exe_1', timingMs: { total: 3.2 }, sessionId: 'ses_1' }

describe('hasCompleteMeta', () => {
  it('recognises the usual V4 answer, compact or pretty-printed', () => {
    const answer = { output: { text: 'done', tokens: 42 }, effective: { policy: 'default' }, meta: FULL_META }
    expect(complete(JSON.stringify(answer), true)).toBe(true)
    expect(complete(JSON.stringify(answer, null, 2), true)).toBe(true)
    expect(complete(`\r\n\t ${JSON.stringify({ meta: FULL_META, output: 1 })} \n`, true)).toBe(true)
    expect(complete('{ "meta" : { "requestId" : 1 , "timingMs" : { "total" : 0 } } }')).toBe(true)
  })

  it('asks for meta.sessionId only on session calls', () => {
    const text = JSON.stringify({ meta: { requestId: 'r', timingMs: { total: 1 } } })
    expect(complete(text, false)).toBe(true)
    expect(complete(text, true)).toBe(false)
  })

  it.each([
    ['no meta', { output: 1 }],
    ['no requestId', { meta: { timingMs: { total: 1 } } }],
    ['no timingMs', { meta: { requestId: 'r' } }],
    ['no timingMs.total', { meta: { requestId: 'r', timingMs: { backend: 1 } } }],
    ['meta one level down', { output: { meta: FULL_META } }],
    ['requestId one level down in meta', { meta: { detail: { requestId: 'r' }, timingMs: { total: 1 } } }],
    ['total in a sibling before timingMs', { meta: { requestId: 'r', other: { total: 1 }, timingMs: {} } }],
    ['total in a sibling after timingMs', { meta: { requestId: 'r', timingMs: {}, other: { total: 1 } } }],
    ['requestId in an object after meta', { meta: { timingMs: { total: 1 } }, output: { requestId: 'r' } }],
    ['total in an object after meta', { meta: { requestId: 'r', timingMs: {} }, output: { detail: { total: 1 } } }],
    ['total inside an array in timingMs', { meta: { requestId: 'r', timingMs: { parts: [{ total: 1 }] } } }],
    ['the keys only inside a string', { note: '"meta":{"requestId":"r","timingMs":{"total":1}}' }]
  ])('is false with %s', (_case, document) => {
    expect(complete(JSON.stringify(document))).toBe(false)
  })

  it.each([
    ['a top-level array', `[${JSON.stringify({ meta: FULL_META })}]`],
    ['meta given twice, the last empty', `{"meta":${JSON.stringify(FULL_META)},"meta":{}}`],
    ['meta given again with an escaped name', `{"meta":${JSON.stringify(FULL_META)},"\\u006deta":{}}`],
    ['timingMs given twice', '{"meta":{"requestId":"r","timingMs":{"total":1},"timingMs":{}}}'],
    ['an escaped name inside meta', '{"meta":{"requestId":"r","timingMs":{"total":1},"\\u0074imingMs":{}}}'],
    ['a meta that is not an object', '{"meta":"opaque"}'],
    ['a timingMs that is not an object', '{"meta":{"requestId":"r","timingMs":5}}'],
    ['truncated bytes', `{"meta":${JSON.stringify(FULL_META)}`.slice(0, 30)],
    ['an unterminated string', '{"meta":{"requestId":"r'],
    ['a byte order mark', `\ufeff${JSON.stringify({ meta: FULL_META })}`]
  ])('leaves %s to the parser', (_case, text) => {
    expect(complete(text, true)).toBe(false)
  })

  it('never says complete when parsing would change something, over generated documents', () => {
    let seed = 42
    const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648)
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T
    const NAMES = ['meta', 'requestId', 'timingMs', 'total', 'sessionId', 'x'] as const
    const space = (): string => pick(['', '', ' ', '\n  ', '\t'])
    const name = (key: string): string => {
      const roll = random()
      if (roll < 0.05) return `"\\u00${key.charCodeAt(0).toString(16)}${key.slice(1)}"`
      if (roll < 0.08) return `"${key}\\n"`
      return JSON.stringify(key)
    }
    const value = (depth: number, preferred?: string): string => {
      const roll = random()
      if (depth > 3 || roll < 0.3) return pick(['1', '"s"', '"{\\"meta\\":{}}"', 'null', 'true', '[]', '"\\\\"'])
      if (roll < 0.4) return `[${space()}${value(depth + 1)}${space()}]`
      const keys: string[] = preferred === 'meta' ? ['requestId', 'timingMs', 'sessionId'] : preferred === 'timingMs' ? ['total'] : ['meta']
      const members: string[] = []
      const count = Math.floor(random() * 4)
      for (let member = 0; member < count; member++) keys.push(pick(NAMES))
      for (const key of keys) if (random() < 0.85) members.push(`${space()}${name(key)}${space()}:${space()}${value(depth + 1, key)}`)
      return `{${members.join(',')}${space()}}`
    }
    let completeCount = 0
    for (let run = 0; run < 5_000; run++) {
      const text = `${space()}${value(0, 'root')}${space()}`
      const needsSessionId = random() < 0.5
      if (complete(text, needsSessionId)) completeCount++
      // Cut short, the same bytes are never valid JSON, whatever the verdict.
      complete(text.slice(0, Math.floor(random() * text.length)), needsSessionId)
    }
    // The generator must reach both verdicts, or the property above says little.
    expect(completeCount).toBeGreaterThan(100)
    expect(completeCount).toBeLessThan(4_000)
  })
})
