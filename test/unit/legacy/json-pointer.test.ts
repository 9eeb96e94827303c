import { describe, expect, it } from 'vitest'
import { encodeToken, getAtPointer, pointerTokens, setAtPointer } from '../../../src/util/json-pointer.js'

describe('pointerTokens', () => {
  it('is empty for the whole-document pointer ""', () => {
    expect(pointerTokens('')).toEqual([])
  })

  it('splits a pointer into its tokens', () => {
    expect(pointerTokens('/payload/data/0')).toEqual(['payload', 'data', '0'])
  })

  it('decodes ~1 as / and ~0 as ~', () => {
    expect(pointerTokens('/a~1b/m~0n')).toEqual(['a/b', 'm~n'])
  })

  it('decodes ~01 as ~1, not as / (RFC 6901 section 4 order)', () => {
    expect(pointerTokens('/~01')).toEqual(['~1'])
  })

  it('reads "/" as the empty key', () => {
    expect(pointerTokens('/')).toEqual([''])
  })
})

describe('encodeToken', () => {
  it('encodes ~ as ~0 and / as ~1', () => {
    expect(encodeToken('a/b~c')).toBe('a~1b~0c')
  })

  it('round-trips through pointerTokens', () => {
    for (const token of ['~1', '/~0/', 'plain', '']) expect(pointerTokens(`/${encodeToken(token)}`)).toEqual([token])
  })
})

describe('getAtPointer', () => {
  const document = { payload: { data: [10, 20], 'a/b': 'slash', 'm~n': 'tilde', '': 'empty' }, nothing: null }

  it('returns the whole document for ""', () => {
    expect(getAtPointer(document, '')).toBe(document)
  })

  it('reads nested objects and array indexes', () => {
    expect(getAtPointer(document, '/payload/data/1')).toBe(20)
  })

  it('reads keys written with ~1 and ~0 escapes', () => {
    expect(getAtPointer(document, '/payload/a~1b')).toBe('slash')
    expect(getAtPointer(document, '/payload/m~0n')).toBe('tilde')
  })

  it('reads the empty key', () => {
    expect(getAtPointer(document, '/payload/')).toBe('empty')
  })

  it('returns a null value as null', () => {
    expect(getAtPointer(document, '/nothing')).toBeNull()
  })

  it('returns undefined for a missing step or a step through a non-container', () => {
    expect(getAtPointer(document, '/missing/deeper')).toBeUndefined()
    expect(getAtPointer(document, '/nothing/x')).toBeUndefined()
    expect(getAtPointer(document, '/payload/data/1/x')).toBeUndefined()
  })

  it('never reads inherited members such as __proto__, constructor or toString', () => {
    expect(getAtPointer({}, '/__proto__')).toBeUndefined()
    expect(getAtPointer({}, '/constructor')).toBeUndefined()
    expect(getAtPointer({}, '/toString')).toBeUndefined()
  })

  it('reads a __proto__ key that is an own member of parsed JSON', () => {
    expect(getAtPointer(JSON.parse('{"__proto__":{"x":1}}'), '/__proto__/x')).toBe(1)
  })
})

describe('setAtPointer', () => {
  it('sets a value at a top-level key', () => {
    const document: Record<string, unknown> = { a: 1 }
    expect(setAtPointer(document, '/b', 2)).toBe(true)
    expect(document).toEqual({ a: 1, b: 2 })
  })

  it('overwrites an existing value', () => {
    const document: Record<string, unknown> = { a: 1 }
    setAtPointer(document, '/a', 'new')
    expect(document.a).toBe('new')
  })

  it('creates the objects on the way', () => {
    const document: Record<string, unknown> = {}
    setAtPointer(document, '/x/y/z', true)
    expect(document).toEqual({ x: { y: { z: true } } })
  })

  it('writes keys given with ~1 and ~0 escapes', () => {
    const document: Record<string, unknown> = {}
    setAtPointer(document, '/a~1b/m~0n', 1)
    expect(document).toEqual({ 'a/b': { 'm~n': 1 } })
  })

  it('returns false and changes nothing when a step is not an object', () => {
    const document: Record<string, unknown> = { text: 'x', list: [1], nothing: null }
    const before = structuredClone(document)
    expect(setAtPointer(document, '/text/y', 1)).toBe(false)
    expect(setAtPointer(document, '/list/0', 1)).toBe(false)
    expect(setAtPointer(document, '/nothing/y', 1)).toBe(false)
    expect(document).toEqual(before)
  })

  it('returns false for the whole-document pointer', () => {
    expect(setAtPointer({}, '', 1)).toBe(false)
  })

  it('keeps __proto__ a plain own key and pollutes no prototype', () => {
    const document: Record<string, unknown> = {}
    expect(setAtPointer(document, '/__proto__/polluted', true)).toBe(true)
    expect(Object.hasOwn(document, '__proto__')).toBe(true)
    expect(Object.getPrototypeOf(document)).toBe(Object.prototype)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
    expect(JSON.stringify(document)).toBe('{"__proto__":{"polluted":true}}')
  })

  it('sets a last token named __proto__ as a plain own key', () => {
    const document: Record<string, unknown> = {}
    setAtPointer(document, '/__proto__', { polluted: true })
    expect(Object.getPrototypeOf(document)).toBe(Object.prototype)
    expect(JSON.parse(JSON.stringify(document))).toEqual(JSON.parse('{"__proto__":{"polluted":true}}'))
  })
})
