import { describe, expect, it } from 'vitest'
import { legacyFieldsSchema } from '../../../src/config/schema.js'
import { buildLegacyCalls, type ExecuteCalls } from '../../../src/legacy/legacy-calls.js'
import { parseRuntimeBody } from '../../../src/legacy/prepare-legacy-call.js'
import type { CompiledRoute } from '../../../src/legacy/route-table.js'
import { toJsonBody } from '../../../src/legacy/to-json-body.js'
import { translateExecute } from '../../../src/legacy/translate.js'

const ROUTE = { method: 'POST', path: '/v1/headless/runs', label: 'POST /v1/headless/runs', action: 'execute', stateKey: undefined, rewrite: undefined, segments: [], staticMatch: undefined } as CompiledRoute
const TENANT = { fields: legacyFieldsSchema.parse({}), unknownFields: 'keep' as const }

/** A small deterministic generator (mulberry32), so that a failure names its seed. */
function random(seed: number): () => number {
  let state = seed
  return () => {
    state = (state + 0x6d2b79f5) | 0
    let t = Math.imul(state ^ (state >>> 15), 1 | state)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const NAMES = ['input', 'policy', 'route', 'risk', 'state', 'stateId', 'trace', 'a"b', 'c\\d', '{', ',', '__proto__', '', 'é']
const STRINGS = ['', 'x', 'a"b', 'c\\', '\\"', '{[,:]}', 'é\u2028', '\u0000']

function value(next: () => number, depth: number): string {
  const pick = next()
  if (depth > 3 || pick < 0.3) return JSON.stringify(STRINGS[Math.floor(next() * STRINGS.length)])
  if (pick < 0.45) return String(Math.round(next() * 2000 - 1000) / 8)
  if (pick < 0.5) return ['true', 'false', 'null'][Math.floor(next() * 3)] as string
  if (pick < 0.7) return `[${Array.from({ length: Math.floor(next() * 4) }, () => value(next, depth + 1)).join(spacing(next))}]`
  return object(next, depth + 1)
}

function spacing(next: () => number): string {
  return next() < 0.5 ? ',' : ' ,\n\t'
}

function object(next: () => number, depth: number): string {
  return `{${members(next, depth).map((member) => member.text).join(spacing(next))}}`
}

function members(next: () => number, depth: number): { name: string; text: string }[] {
  return Array.from({ length: Math.floor(next() * 5) }, () => {
    const name = NAMES[Math.floor(next() * NAMES.length)] as string
    return { name, text: `${JSON.stringify(name)}${next() < 0.5 ? ':' : ' : '}${value(next, depth + 1)}` }
  })
}

describe('the legacy body sent as the V4 execute body (prepare-legacy-call.ts asV4ExecuteBody)', () => {
  it('is taken for every body without a repeated top-level name, and says what the serialised translation says (2,000 generated bodies)', () => {
    let sentAsIs = 0
    for (let seed = 1; seed <= 2_000; seed++) {
      const next = random(seed)
      // Every body has an input first; some repeat a name at the top, some have a policy that is not a string (a 400).
      const top = [{ name: 'input', text: `"input":${value(next, 1)}` }, ...members(next, 1)]
      const text = `{${top.map((member) => member.text).join(spacing(next))}}`
      const repeats = new Set(top.map((member) => member.name)).size !== top.length
      let parsed: ReturnType<typeof parseRuntimeBody>
      try {
        parsed = parseRuntimeBody(Buffer.from(text), TENANT, ROUTE)
      } catch {
        continue
      }
      const serialised = toJsonBody(translateExecute(parsed.call))
      const calls = buildLegacyCalls({ tenant: 'acme', upstreamOrigin: 'http://v4', route: ROUTE, params: {}, call: parsed.call, body: parsed.body, asSent: parsed.asSent, requestHeaders: {}, headers: {}, tokenFingerprint: 'f', sessions: { staleStatuses: [404], sessionIdPaths: ['/sessionId'] } }) as ExecuteCalls
      expect(JSON.parse(calls.execution.body), `seed ${seed}: ${text}`).toEqual(JSON.parse(serialised))
      // Sent as written exactly when no top-level name repeats: the values the gateway checked are the ones V4 reads.
      expect(parsed.asSent, `seed ${seed}: ${text}`).toBe(repeats ? undefined : text)
      if (parsed.asSent !== undefined) sentAsIs++
    }
    expect(sentAsIs).toBeGreaterThan(300)
  })
})
