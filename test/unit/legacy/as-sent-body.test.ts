import { describe, expect, it } from 'vitest'
import { legacyFieldsSchema } from '../../../src/config/schema.js'
import type { GatewayError } from '../../../src/errors/registry.js'
import { buildLegacyCalls, type ExecuteCalls } from '../../../src/legacy/legacy-calls.js'
import { parseRuntimeBody } from '../../../src/legacy/prepare-legacy-call.js'
import type { CompiledRoute } from '../../../src/legacy/route-table.js'
import { toJsonBody } from '../../../src/legacy/to-json-body.js'
import { translateExecute } from '../../../src/legacy/translate.js'
import { seededRandom } from '../../helpers/seeded-random.js'

const ROUTE = { method: 'POST', path: '/v1/headless/runs', label: 'POST /v1/headless/runs', action: 'execute', stateKey: undefined, rewrite: undefined, segments: [], staticMatch: undefined, readParams: new Set<string>() } as CompiledRoute
const TENANT = { fields: legacyFieldsSchema.parse({}), unknownFields: 'keep' as const }

const NAMES = ['input', 'policy', 'route', 'risk', 'state', 'stateId', 'trace', 'a"b', 'c\\d', '{', ',', '__proto__', '', 'é', 'Policy', 'riſk', 'INPUT', 'İnput', 'naïve!!']
const STRINGS = ['', 'x', 'a"b', 'c\\', '\\"', '{[,:]}', 'é\u2028', '\u0000', '1.5e3']
const FOLDED = new Set(['Policy', 'riſk', 'INPUT', 'İnput'])

/** A generated JSON text, and whether it is as JSON.stringify would write its value but for spacing, order and escapes. */
interface Generated {
  text: string
  plain: boolean
}

function value(next: () => number, depth: number): Generated {
  const pick = next()
  if (depth > 3 || pick < 0.3) return { text: JSON.stringify(STRINGS[Math.floor(next() * STRINGS.length)]), plain: true }
  if (pick < 0.4) return { text: String(Math.round(next() * 2000 - 1000)), plain: true }
  if (pick < 0.45) return ['1.5', '1e2', '-0', '2.0', '-0.25', '1000000000000000000000'].map((text) => ({ text, plain: false }))[Math.floor(next() * 6)] as Generated
  if (pick < 0.5) return { text: ['true', 'false', 'null'][Math.floor(next() * 3)] as string, plain: true }
  if (pick < 0.7) {
    const items = Array.from({ length: Math.floor(next() * 4) }, () => value(next, depth + 1))
    return { text: `[${items.map((item) => item.text).join(spacing(next))}]`, plain: items.every((item) => item.plain) }
  }
  return object(members(next, depth + 1))
}

function spacing(next: () => number): string {
  return next() < 0.5 ? ',' : ' ,\n\t'
}

interface Member extends Generated {
  name: string
}

function members(next: () => number, depth: number): Member[] {
  return Array.from({ length: Math.floor(next() * 5) }, () => {
    const name = NAMES[Math.floor(next() * NAMES.length)] as string
    const inner = value(next, depth + 1)
    return { name, text: `${JSON.stringify(name)}${next() < 0.5 ? ':' : ' : '}${inner.text}`, plain: inner.plain }
  })
}

/** An object of `list`: plain when its members are and no name repeats. */
function object(list: Member[]): Generated {
  const plain = list.every((member) => member.plain) && new Set(list.map((member) => member.name)).size === list.length
  return { text: `{${list.map((member) => member.text).join(',')}}`, plain }
}

describe('the legacy body sent as the V4 execute body (prepare-legacy-call.ts asV4ExecuteBody)', () => {
  it('is taken exactly for the bodies any reader reads as the serialised translation, and says what it says (2,000 generated bodies)', () => {
    let sentAsIs = 0
    for (let seed = 1; seed <= 2_000; seed++) {
      const next = seededRandom(seed)
      // Every body has an input first; some repeat a name, some write a number another way, some have a
      // name a case-blind reader takes for a checked field, some a policy that is not a string (a 400).
      const top = [{ name: 'input', ...value(next, 1) }, ...members(next, 1)]
      top[0] = { ...(top[0] as Member), text: `"input":${(top[0] as Member).text}` }
      const generated = object(top)
      const text = generated.text
      // A top-level name written with an escape is not decoded to be compared: such a body is serialised too.
      const expected = generated.plain && !top.some((member) => FOLDED.has(member.name) || JSON.stringify(member.name).includes('\\'))
      let parsed: ReturnType<typeof parseRuntimeBody>
      try {
        parsed = parseRuntimeBody(Buffer.from(text), TENANT, ROUTE)
      } catch (error) {
        // The bodies meant to be refused (a policy not a string): a 400, never anything else.
        expect((error as GatewayError).code, `seed ${seed}: ${text}`).toBe('INVALID_REQUEST')
        continue
      }
      const serialised = toJsonBody(translateExecute(parsed.call))
      const calls = buildLegacyCalls({ tenant: 'acme', upstreamOrigin: 'http://v4', route: ROUTE, params: {}, call: parsed.call, body: parsed.body, asSent: parsed.asSent, requestHeaders: {}, headers: {}, tokenFingerprint: 'f', sessions: { staleStatuses: [404], sessionIdPaths: ['/sessionId'] } }) as ExecuteCalls
      expect(JSON.parse(calls.execution.body), `seed ${seed}: ${text}`).toEqual(JSON.parse(serialised))
      // Sent as written exactly when any reader reads from it what the serialised translation says.
      expect(parsed.asSent, `seed ${seed}: ${text}`).toBe(expected ? text : undefined)
      if (parsed.asSent !== undefined) sentAsIs++
    }
    expect(sentAsIs).toBeGreaterThan(200)
  })
})
