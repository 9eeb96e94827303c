import { describe, expect, it } from 'vitest'
import { legacyFieldsSchema, type LegacyFields } from '../../../src/config/schema.js'
import { GatewayError } from '../../../src/errors/registry.js'
import { isJsonContentType, isLegacyBodyContentType, parseJsonObjectText, parseLegacyCall } from '../../../src/legacy/parse-legacy-body.js'

const DEFAULT_FIELDS: LegacyFields = legacyFieldsSchema.parse({})
const REMAPPED_FIELDS: LegacyFields = legacyFieldsSchema.parse({ input: '/payload/data', policy: '/governance/policy', state: '/client/state' })

function failure(run: () => unknown): GatewayError {
  try {
    run()
  } catch (error) {
    return error as GatewayError
  }
  throw new Error('expected a GatewayError, nothing was thrown')
}

function pointersOf(error: GatewayError): string[] {
  return (error.details ?? []).map((detail) => detail.pointer)
}

function parseSession(body: Record<string, unknown>) {
  return parseLegacyCall(body, 'session-execute', DEFAULT_FIELDS, 'keep')
}

describe('isLegacyBodyContentType', () => {
  it.each(['application/json', 'application/json; charset=utf-8', 'Application/JSON', ' application/json ; charset=utf-8'])('accepts %s', (type) => {
    expect(isLegacyBodyContentType(type)).toBe(true)
  })

  it.each([undefined, 'text/plain', 'application/jsonx', 'application/x-www-form-urlencoded', 'text/json', 'application/vnd.legacy+json'])('refuses %s', (type) => {
    expect(isLegacyBodyContentType(type)).toBe(false)
  })
})

describe('isJsonContentType (an answer says JSON)', () => {
  it.each(['application/json', 'application/json; charset=utf-8', 'Application/JSON', 'application/problem+json'])('accepts %s', (type) => {
    expect(isJsonContentType(type)).toBe(true)
  })

  it.each([undefined, 'text/plain', 'application/jsonx', 'text/json'])('refuses %s', (type) => {
    expect(isJsonContentType(type)).toBe(false)
  })
})

describe('parseJsonObjectText', () => {
  it('returns a JSON object body', () => {
    expect(parseJsonObjectText(Buffer.from('{"input":1}')).object).toEqual({ input: 1 })
  })

  it('answers 400 INVALID_REQUEST with pointer "" when the body is not JSON', () => {
    const error = failure(() => parseJsonObjectText(Buffer.from('{"input":')).object)
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', statusCode: 400 })
    expect(pointersOf(error)).toEqual([''])
  })

  it.each(['[1,2]', 'null', '"text"', '42', 'true'])('answers 400 INVALID_REQUEST when the body is JSON but not an object: %s', (text) => {
    const error = failure(() => parseJsonObjectText(Buffer.from(text)).object)
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', statusCode: 400 })
    expect(pointersOf(error)).toEqual([''])
  })

  it('answers 400 INVALID_REQUEST for an empty body', () => {
    expect(failure(() => parseJsonObjectText(Buffer.alloc(0)).object)).toMatchObject({ code: 'INVALID_REQUEST' })
  })

  // "Unchanged" is by value (docs/decisions.md): these are carried re-serialised, equal to what was sent.
  it.each([
    ['-0', '0'],
    ['1.50', '1.5'],
    ['1e2', '100'],
    ['-0.0e5', '0']
  ])('accepts %s, which goes on as %s, the same number', (numeral, sent) => {
    expect(JSON.stringify(parseJsonObjectText(Buffer.from(`{"input":${numeral}}`)).object)).toBe(`{"input":${sent}}`)
  })
})

describe('parseLegacyCall validation', () => {
  it('reads input, policy, route and risk of an execute call', () => {
    const call = parseLegacyCall({ input: { q: 1 }, policy: 'strict', route: 'fast', risk: 'high' }, 'execute', DEFAULT_FIELDS, 'keep')
    expect(call).toMatchObject({ input: { q: 1 }, policy: 'strict', route: 'fast', risk: 'high', unknown: {} })
  })

  it('accepts null as input', () => {
    expect(parseLegacyCall({ input: null }, 'execute', DEFAULT_FIELDS, 'keep').input).toBeNull()
  })

  it('answers 400 INVALID_REQUEST naming /input when input is missing', () => {
    const error = failure(() => parseLegacyCall({ policy: 'strict' }, 'execute', DEFAULT_FIELDS, 'keep'))
    expect(error).toMatchObject({ code: 'INVALID_REQUEST', statusCode: 400 })
    expect(pointersOf(error)).toEqual(['/input'])
  })

  it.each(['policy', 'route', 'risk'])('answers 400 INVALID_REQUEST naming /%s when it is not a string', (field) => {
    const error = failure(() => parseLegacyCall({ input: 1, [field]: 7 }, 'execute', DEFAULT_FIELDS, 'keep'))
    expect(error).toMatchObject({ code: 'INVALID_REQUEST' })
    expect(pointersOf(error)).toEqual([`/${field}`])
  })

  it('names every offending field when several are wrong', () => {
    const error = failure(() => parseLegacyCall({ policy: 1, route: false }, 'execute', DEFAULT_FIELDS, 'keep'))
    expect(pointersOf(error).sort()).toEqual(['/input', '/policy', '/route'])
  })

  it('puts the pointers in the error message too', () => {
    expect(failure(() => parseLegacyCall({}, 'execute', DEFAULT_FIELDS, 'keep')).message).toContain('/input')
  })

  it('reads state and stateId of a session-execute call', () => {
    const call = parseSession({ input: 1, state: { policy: 'p', route: 'r', risk: 'high' }, stateId: 'client-1' })
    expect(call).toMatchObject({ state: { policy: 'p', route: 'r', risk: 'high' }, stateId: 'client-1', unknown: {} })
  })

  it('answers 400 naming /state when state is not an object', () => {
    expect(pointersOf(failure(() => parseSession({ input: 1, state: 'strict' })))).toEqual(['/state'])
  })

  it('answers 400 naming /state/policy when a state field is not a string', () => {
    expect(pointersOf(failure(() => parseSession({ input: 1, state: { policy: 5 } })))).toEqual(['/state/policy'])
  })

  it('answers 400 naming each field of state other than policy, route and risk by its own pointer', () => {
    const error = failure(() => parseSession({ input: 1, state: { policy: 'p', owner: 'x', 'a/b': 1 } }))
    expect(error).toMatchObject({ code: 'INVALID_REQUEST' })
    expect(pointersOf(error)).toEqual(['/state/owner', '/state/a~1b'])
  })

  it('answers 400 naming /stateId when stateId is empty', () => {
    expect(pointersOf(failure(() => parseSession({ input: 1, stateId: '' })))).toEqual(['/stateId'])
  })

  it('answers 400 naming /stateId when stateId is longer than 256 characters', () => {
    expect(pointersOf(failure(() => parseSession({ input: 1, stateId: 'x'.repeat(257) })))).toEqual(['/stateId'])
  })

  it('answers 400 naming /stateId when stateId is not a string', () => {
    expect(pointersOf(failure(() => parseSession({ input: 1, stateId: 12 })))).toEqual(['/stateId'])
  })

  it('accepts a stateId of 1 and of 256 characters', () => {
    expect(parseSession({ input: 1, stateId: 'x' }).stateId).toBe('x')
    expect(parseSession({ input: 1, stateId: 'y'.repeat(256) }).stateId).toBe('y'.repeat(256))
  })

  it('treats state and stateId as unknown fields on an execute call, without checking them', () => {
    const call = parseLegacyCall({ input: 1, state: 'anything', stateId: '' }, 'execute', DEFAULT_FIELDS, 'keep')
    expect(call.state).toBeUndefined()
    expect(call.unknown).toEqual({ state: 'anything', stateId: '' })
  })
})

describe('parseLegacyCall with remapped legacy.fields', () => {
  it('reads each field at its remapped pointer', () => {
    const call = parseLegacyCall({ payload: { data: [1] }, governance: { policy: 'strict' }, client: { state: { route: 'r' } } }, 'session-execute', REMAPPED_FIELDS, 'keep')
    expect(call).toMatchObject({ input: [1], policy: 'strict', state: { route: 'r' } })
  })

  it('names the remapped pointer when input is missing', () => {
    expect(pointersOf(failure(() => parseLegacyCall({ input: 1 }, 'execute', REMAPPED_FIELDS, 'keep')))).toEqual(['/payload/data'])
  })

  it('names the remapped pointer when policy has the wrong type', () => {
    const error = failure(() => parseLegacyCall({ payload: { data: 1 }, governance: { policy: 9 } }, 'execute', REMAPPED_FIELDS, 'keep'))
    expect(pointersOf(error)).toEqual(['/governance/policy'])
  })

  it('names a nested state field under the remapped state pointer', () => {
    const error = failure(() => parseLegacyCall({ payload: { data: 1 }, client: { state: { risk: 3 } } }, 'session-execute', REMAPPED_FIELDS, 'keep'))
    expect(pointersOf(error)).toEqual(['/client/state/risk'])
  })

  it('reads a field the map points inside state there, and checks the rest of state as SPEC 4 does', () => {
    const fields = legacyFieldsSchema.parse({ stateId: '/state/id' })
    const call = parseLegacyCall({ input: 1, state: { id: 'c1', policy: 'p' } }, 'session-execute', fields, 'keep')
    expect(call).toMatchObject({ stateId: 'c1', state: { policy: 'p' }, unknown: {} })
    expect(call.state).not.toHaveProperty('id')
    // A state that held only the id has no defaults; another member is still refused, by its pointer.
    expect(parseLegacyCall({ input: 1, state: { id: 'c1' } }, 'session-execute', fields, 'keep').state).toEqual({})
    expect(pointersOf(failure(() => parseLegacyCall({ input: 1, state: { id: 'c1', colour: 'red' } }, 'session-execute', fields, 'keep')))).toEqual(['/state/colour'])
  })

  it('takes a body: state key that points inside state out of state before checking it', () => {
    const call = parseLegacyCall({ input: 1, state: { session: { key: 'k1' }, risk: 'low' } }, 'session-execute', DEFAULT_FIELDS, 'keep', '/state/session')
    expect(call.state).toEqual({ risk: 'low' })
  })

  it('treats a default field name that is no longer mapped as an unknown field', () => {
    const call = parseLegacyCall({ payload: { data: 1 }, stateId: 'old-name' }, 'execute', REMAPPED_FIELDS, 'keep')
    expect(call.unknown).toEqual({ stateId: 'old-name' })
  })

  // Carried on, each would be overwritten by the gateway's own field or become a per-call
  // override the client never meant (SPEC 4: nothing dropped silently).
  const GOVERNANCE_FIELDS: LegacyFields = legacyFieldsSchema.parse({ route: '/gov/route', risk: '/gov/risk' })
  it.each([
    ['execute', 'policy', REMAPPED_FIELDS],
    ['execute', 'input', REMAPPED_FIELDS],
    ['session-execute', 'input', REMAPPED_FIELDS],
    ['session-execute', 'route', GOVERNANCE_FIELDS],
    ['session-execute', 'risk', GOVERNANCE_FIELDS]
  ] as const)('refuses a %s member named %s that the remapped field map leaves unread: it would clash with the V4 field', (action, name, fields) => {
    const body = fields === REMAPPED_FIELDS ? { payload: { data: 1 }, [name]: 'old-name' } : { input: 1, [name]: 'old-name' }
    const parse = () => parseLegacyCall(body, action, fields, 'keep')
    expect(parse).toThrow(GatewayError)
    expect(parse).toThrow(expect.objectContaining({ code: 'INVALID_REQUEST', details: [expect.objectContaining({ pointer: `/${name}` })] }))
  })

  it('carries nothing of such a member with unknownFields drop, so nothing clashes', () => {
    expect(parseLegacyCall({ payload: { data: 1 }, policy: 'old-name' }, 'execute', REMAPPED_FIELDS, 'drop').unknown).toEqual({})
  })
})

describe('parseLegacyCall unknown fields', () => {
  it('keeps the top-level fields it does not consume with unknownFields keep', () => {
    const call = parseLegacyCall({ input: 1, policy: 'p', trace: 'abc', extra: { a: [1] } }, 'execute', DEFAULT_FIELDS, 'keep')
    expect(call.unknown).toEqual({ trace: 'abc', extra: { a: [1] } })
  })

  it('drops them with unknownFields drop', () => {
    const call = parseLegacyCall({ input: 1, trace: 'abc' }, 'execute', DEFAULT_FIELDS, 'drop')
    expect(call.unknown).toEqual({})
  })

  it('consumes state and stateId on a session-execute call', () => {
    expect(parseSession({ input: 1, state: {}, stateId: 's', trace: 't' }).unknown).toEqual({ trace: 't' })
  })

  it('consumes what a body: state key points at, and drops a member left empty', () => {
    const call = parseLegacyCall({ input: 1, client: { id: 'c-1' }, trace: 't' }, 'session-execute', DEFAULT_FIELDS, 'keep', '/client/id')
    expect(call.unknown).toEqual({ trace: 't' })
  })

  it('carries the rest of a member a body: state key points into', () => {
    const call = parseLegacyCall({ input: 1, client: { id: 'c-1', name: 'n' } }, 'session-execute', DEFAULT_FIELDS, 'keep', '/client/id')
    expect(call.unknown).toEqual({ client: { name: 'n' } })
  })

  it('carries the rest of the members nested field pointers point into, without changing the body', () => {
    const body = {
      payload: { data: [1], extra: 'e' },
      governance: { policy: 'strict' },
      client: { state: { route: 'r' }, name: 'n', deep: { kept: true } },
      trace: 't'
    }
    const copy = structuredClone(body)
    const call = parseLegacyCall(body, 'session-execute', REMAPPED_FIELDS, 'keep')
    expect(call).toMatchObject({ input: [1], policy: 'strict', state: { route: 'r' } })
    expect(call.unknown).toEqual({ payload: { extra: 'e' }, client: { name: 'n', deep: { kept: true } }, trace: 't' })
    expect(body).toEqual(copy)
  })

  it('carries a member a pointer points into whole when the pointed-at part is not there, empty objects included', () => {
    const call = parseLegacyCall({ payload: { data: 1 }, governance: {}, client: { other: {} } }, 'session-execute', REMAPPED_FIELDS, 'keep')
    expect(call.unknown).toEqual({ governance: {}, client: { other: {} } })
    const session = parseLegacyCall({ input: 1, client: {} }, 'session-execute', DEFAULT_FIELDS, 'keep', '/client/id')
    expect(session.unknown).toEqual({ client: {} })
    const deep = parseLegacyCall({ input: 1, client: { id: {} } }, 'session-execute', DEFAULT_FIELDS, 'keep', '/client/id/x')
    expect(deep.unknown).toEqual({ client: { id: {} } })
  })

  it('carries nothing when a field pointer of no tokens takes the whole body', () => {
    const fields = legacyFieldsSchema.parse({ input: '' })
    const call = parseLegacyCall({ text: 'the whole body is the input', trace: 't' }, 'execute', fields, 'keep')
    expect(call.input).toEqual({ text: 'the whole body is the input', trace: 't' })
    expect(call.unknown).toEqual({})
  })

  it('keeps an array a field pointer points into whole', () => {
    const fields = legacyFieldsSchema.parse({ input: '/items/0' })
    const call = parseLegacyCall({ items: ['first', 'second'], trace: 't' }, 'execute', fields, 'keep')
    expect(call.input).toBe('first')
    expect(call.unknown).toEqual({ items: ['first', 'second'], trace: 't' })
  })

  it('keeps a nested __proto__ member as a plain member when carrying the rest of an object', () => {
    const body = JSON.parse('{"payload":{"data":1,"__proto__":{"polluted":true}}}') as Record<string, unknown>
    const call = parseLegacyCall(body, 'execute', REMAPPED_FIELDS, 'keep')
    const payload = call.unknown.payload as Record<string, unknown>
    expect(Object.hasOwn(payload, '__proto__')).toBe(true)
    expect(Object.getPrototypeOf(payload)).toBe(Object.prototype)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('keeps a __proto__ member as a plain unknown field without touching prototypes', () => {
    const body = JSON.parse('{"input":1,"__proto__":{"polluted":true}}') as Record<string, unknown>
    const call = parseLegacyCall(body, 'execute', DEFAULT_FIELDS, 'keep')
    expect(Object.hasOwn(call.unknown, '__proto__')).toBe(true)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })
})

describe('parseLegacyCall on the edges of SPEC 4\'s field table', () => {
  // Each body sits on an edge of the table: its verdict written out (the pointers of a 400, or the
  // fields read), for both actions, so that a schema change the table does not allow shows here.
  type Verdict = { refused: string[] } | { read: Record<string, unknown> }
  const cases: [body: Record<string, unknown>, execute: Verdict, sessionExecute: Verdict][] = [
    [{ input: 1 }, { read: { input: 1 } }, { read: { input: 1 } }],
    [{ input: null }, { read: { input: null } }, { read: { input: null } }],
    [{ input: 'x', policy: 'p', route: 'r', risk: 'low' }, { read: { input: 'x', policy: 'p', route: 'r', risk: 'low' } }, { read: { input: 'x', policy: 'p', route: 'r', risk: 'low' } }],
    [{ input: 1, policy: 5 }, { refused: ['/policy'] }, { refused: ['/policy'] }],
    [{ policy: 'p' }, { refused: ['/input'] }, { refused: ['/input'] }],
    // `state` and `stateId` are session-execute's: on execute they are fields it does not consume.
    [{ input: 1, state: { policy: 'a' } }, { read: { input: 1 } }, { read: { input: 1, state: { policy: 'a' } } }],
    [{ input: 1, state: {} }, { read: { input: 1 } }, { read: { input: 1, state: {} } }],
    [{ input: 1, state: { policy: 'a', extra: 1 } }, { read: { input: 1 } }, { refused: ['/state/extra'] }],
    [{ input: 1, state: null }, { read: { input: 1 } }, { refused: ['/state'] }],
    [{ input: 1, state: [] }, { read: { input: 1 } }, { refused: ['/state'] }],
    [{ input: 1, state: { risk: 3 } }, { read: { input: 1 } }, { refused: ['/state/risk'] }],
    [{ input: 1, state: JSON.parse('{"__proto__": {"policy": "x"}}') as unknown }, { read: { input: 1 } }, { refused: ['/state/__proto__'] }],
    [{ input: 1, stateId: '' }, { read: { input: 1 } }, { refused: ['/stateId'] }],
    [{ input: 1, stateId: 'x'.repeat(256) }, { read: { input: 1 } }, { read: { input: 1, stateId: 'x'.repeat(256) } }],
    [{ input: 1, stateId: 'x'.repeat(257) }, { read: { input: 1 } }, { refused: ['/stateId'] }],
    [{ input: 1, stateId: 5 }, { read: { input: 1 } }, { refused: ['/stateId'] }],
    [{ input: 1, stateId: 's', state: { route: 'r', risk: 'high' }, risk: 'low' }, { read: { input: 1, risk: 'low' } }, { read: { input: 1, risk: 'low', state: { route: 'r', risk: 'high' }, stateId: 's' } }]
  ]
  const withoutUndefined = (value: unknown): unknown => JSON.parse(JSON.stringify(value))

  function verdictOf(body: Record<string, unknown>, action: 'execute' | 'session-execute'): Verdict {
    try {
      return { read: withoutUndefined({ ...parseLegacyCall(body, action, DEFAULT_FIELDS, 'drop'), unknown: undefined }) as Record<string, unknown> }
    } catch (error) {
      return { refused: ((error as GatewayError).details ?? []).map((detail) => detail.pointer) }
    }
  }

  it.each(cases)('reads %j as the table says, on execute and on session-execute', (body, execute, sessionExecute) => {
    expect(verdictOf(body, 'execute')).toEqual(execute)
    expect(verdictOf(body, 'session-execute')).toEqual(sessionExecute)
  })
})
