import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { compareAnswers, compileIgnoreList, isJsonMediaType, recordedSegment, type ComparedAnswer } from '../../../src/util/shadow-compare.js'

const JSON_TYPE = 'application/json'
const noIgnore = compileIgnoreList([])

function json(body: unknown, statusCode = 200, contentType = JSON_TYPE): ComparedAnswer {
  return { statusCode, contentType, body: Buffer.from(JSON.stringify(body)) }
}

function raw(text: string, contentType: string | undefined, statusCode = 200): ComparedAnswer {
  return { statusCode, contentType, body: Buffer.from(text) }
}

function hashed(name: string): string {
  return `~h${createHash('sha256').update(name).digest('hex').slice(0, 8)}`
}

const NONE = compileIgnoreList([])

describe('compareAnswers (SPEC 15 "Comparing")', () => {
  it('finds no difference between equal answers whose keys come in another order', () => {
    expect(compareAnswers(json({ a: 1, b: { c: [1, 2] } }), json({ b: { c: [1, 2] }, a: 1 }), noIgnore)).toEqual([])
  })

  it('names a status difference #status, and still compares the bodies', () => {
    expect(compareAnswers(json({ a: 1 }, 200), json({ a: 1 }, 201), noIgnore)).toEqual(['#status'])
    expect(compareAnswers(json({ a: 1 }, 200), json({ a: 2 }, 500), noIgnore)).toEqual(['#status', '/a'])
  })

  it('names a member that differs, one that only one side has, and a change of kind', () => {
    const primary = json({ output: { text: 'x', n: 1 }, only: true, kind: [1] })
    const candidate = json({ output: { text: 'y', n: 1, extra: null }, kind: { a: 1 } })
    expect(compareAnswers(primary, candidate, noIgnore).sort()).toEqual(['/kind', '/only', '/output/extra', '/output/text'])
  })

  it('compares a document nested deeper than a walk of it can go by its bytes, instead of throwing (RangeError)', () => {
    // JSON.parse reads 100,000 levels; a recursive walk runs out of stack long before.
    const deep = `{"input":${'['.repeat(100_000)}${']'.repeat(100_000)}}`
    const primary = raw(deep, JSON_TYPE)
    expect(compareAnswers(primary, raw(deep, JSON_TYPE), noIgnore)).toEqual([])
    expect(compareAnswers(primary, json({ error: { code: 'INVALID_REQUEST' } }, 400), noIgnore)).toEqual(['#status', ''])
    expect(compareAnswers(json({ a: 1 }), primary, noIgnore)).toEqual([''])
  })

  it('compares arrays in order and writes their indexes as *', () => {
    expect(compareAnswers(json({ items: [1, 2] }), json({ items: [2, 1] }), noIgnore)).toEqual(['/items/*'])
    expect(compareAnswers(json({ items: [{ id: 1 }] }), json({ items: [{ id: 2 }] }), noIgnore)).toEqual(['/items/*/id'])
    expect(compareAnswers(json({ items: [1] }), json({ items: [1, 2, 3] }), noIgnore)).toEqual(['/items/*'])
  })

  it('compares numbers by value, as JSON reads them', () => {
    expect(compareAnswers(raw('{"n":1.0}', JSON_TYPE), raw('{"n":1}', JSON_TYPE), noIgnore)).toEqual([])
  })

  it('leaves out the always-ignored meta members', () => {
    const primary = json({ output: 1, meta: { requestId: 'a', timingMs: { total: 3 }, sessionId: 's1', executionId: 'e1', lineageId: 'l1', version: 4 } })
    const candidate = json({ output: 1, meta: { requestId: 'b', timingMs: { total: 9, upstream: 2 }, sessionId: 's2', executionId: 'e2', lineageId: 'l2', version: 4 } })
    expect(compareAnswers(primary, candidate, noIgnore)).toEqual([])
  })

  it('removes the subtree of an ignore pointer whose * stands for any one segment', () => {
    const ignore = compileIgnoreList(['/output/generatedAt', '/items/*/id'])
    const primary = json({ output: { generatedAt: 1, deep: { x: 1 } }, items: [{ id: 'a', v: 1 }, { id: 'b', v: 2 }] })
    const candidate = json({ output: { generatedAt: { other: true }, deep: { x: 1 } }, items: [{ id: 'c', v: 1 }, { v: 2 }] })
    expect(compareAnswers(primary, candidate, ignore)).toEqual([])
    // Only one segment: /items/*/id does not reach /items/0/sub/id.
    expect(compareAnswers(json({ items: [{ sub: { id: 1 } }] }), json({ items: [{ sub: { id: 2 } }] }), ignore)).toEqual(['/items/*/sub/id'])
  })

  it('reads RFC 6901 escapes in ignore pointers', () => {
    const ignore = compileIgnoreList(['/a~1b/c~0d'])
    expect(compareAnswers(json({ 'a/b': { 'c~d': 1 } }), json({ 'a/b': { 'c~d': 2 } }), ignore)).toEqual([])
  })

  it('takes ignored array elements out, so that the rest still lines up', () => {
    const ignore = compileIgnoreList(['/list/0'])
    expect(compareAnswers(json({ list: ['x', 1, 2] }), json({ list: ['y', 1, 2] }), ignore)).toEqual([])
  })

  it('reads every ignore pointer\'s indexes on the answer as it came, whatever the other pointers remove', () => {
    const ignore = compileIgnoreList(['/items/0', '/items/1'])
    // The first two are ignored and the third compared: not the second and third shifted down.
    expect(compareAnswers(json({ items: ['a', 'b1', 'c'] }), json({ items: ['a', 'b2', 'c'] }), ignore)).toEqual([])
    expect(compareAnswers(json({ items: ['a', 'b1', 'c'] }), json({ items: ['a', 'b2', 'c2'] }), ignore)).toEqual(['/items/*'])
    // In either order, and below an element another pointer removes.
    const reversed = compileIgnoreList(['/items/1', '/items/0/id', '/items/0'])
    expect(compareAnswers(json({ items: [{ id: 1 }, 'b1', { n: 1 }] }), json({ items: [{ id: 2 }, 'b2', { n: 1 }] }), reversed)).toEqual([])
    // Nested arrays keep their own indexes.
    const nested = compileIgnoreList(['/rows/0/0', '/rows/1/1'])
    expect(compareAnswers(json({ rows: [['x', 1], [2, 'y']] }), json({ rows: [['z', 1], [2, 'w']] }), nested)).toEqual([])
  })

  it('compares numbers JSON.parse would change by their exact values', () => {
    const text = (body: string) => ({ statusCode: 200, contentType: 'application/json', body: Buffer.from(body) })
    // 20 digits: equal as doubles, not as numbers.
    expect(compareAnswers(text('{"id":12345678901234567890}'), text('{"id":12345678901234567891}'), NONE)).toEqual(['/id'])
    expect(compareAnswers(text('{"big":1e400}'), text('{"big":2e400}'), NONE)).toEqual(['/big'])
    expect(compareAnswers(text('{"id":12345678901234567890,"n":1.50}'), text('{"n":15e-1,"id":1234567890123456789e1}'), NONE)).toEqual([])
    // With such a number on one side, the other side's numbers are read exactly too; signs count.
    expect(compareAnswers(text('{"id":12345678901234567890,"n":-1}'), text('{"id":12345678901234567890,"n":1}'), NONE)).toEqual(['/n'])
    expect(compareAnswers(text('{"id":12345678901234567890,"n":-0}'), text('{"id":12345678901234567890,"n":0.0}'), NONE)).toEqual([])
    // A string that looks like a number stays a string.
    expect(compareAnswers(text('{"id":12345678901234567890,"s":"12"}'), text('{"id":12345678901234567890,"s":12}'), NONE)).toEqual(['/s'])
  })

  it('ignores everything with the root pointer ""', () => {
    expect(compareAnswers(json({ a: 1 }), json({ b: 2 }), compileIgnoreList(['']))).toEqual([])
  })

  it('compares other bodies byte for byte, a difference at ""', () => {
    expect(compareAnswers(raw('ok', 'text/plain'), raw('ok', 'text/plain'), noIgnore)).toEqual([])
    expect(compareAnswers(raw('ok', 'text/plain'), raw('ok ', 'text/plain'), noIgnore)).toEqual([''])
    // Declared JSON that does not parse is another body.
    expect(compareAnswers(raw('{"a":', JSON_TYPE), raw('{"a":', JSON_TYPE), noIgnore)).toEqual([])
  })

  it('names JSON against non-JSON as a mismatch at ""', () => {
    expect(compareAnswers(json({ a: 1 }), raw('{"a":1}', 'text/plain'), noIgnore)).toEqual([''])
    expect(compareAnswers(json({ a: 1 }), raw('{"a":', JSON_TYPE), noIgnore)).toEqual([''])
  })

  it('reads bytes that are not UTF-8 as non-JSON', () => {
    const latin1 = { statusCode: 200, contentType: JSON_TYPE, body: Buffer.from([0x22, 0xe9, 0x22]) }
    expect(compareAnswers(latin1, raw('"é"', JSON_TYPE), noIgnore)).toEqual([''])
  })

  it('takes application/json and any +json type as JSON, parameters aside', () => {
    expect(isJsonMediaType('application/json; charset=utf-8')).toBe(true)
    expect(isJsonMediaType('Application/JSON')).toBe(true)
    expect(isJsonMediaType('application/problem+json')).toBe(true)
    expect(isJsonMediaType('application/vnd.v4.result+json;v=2')).toBe(true)
    expect(isJsonMediaType('text/plain')).toBe(false)
    expect(isJsonMediaType('application/jsonx')).toBe(false)
    expect(isJsonMediaType(undefined)).toBe(false)
  })
})

describe('recorded pointers (SPEC 15 "No content kept")', () => {
  it('keeps a segment of 1-64 characters of [A-Za-z0-9_-]', () => {
    expect(recordedSegment('output_text-2')).toBe('output_text-2')
    expect(recordedSegment('a'.repeat(64))).toBe('a'.repeat(64))
  })

  it('writes any other segment as ~h and the first 8 hex digits of its SHA-256', () => {
    expect(recordedSegment('alice@example.com')).toBe(hashed('alice@example.com'))
    expect(recordedSegment('a'.repeat(65))).toBe(hashed('a'.repeat(65)))
    expect(recordedSegment('')).toBe(hashed(''))
    expect(recordedSegment('a/b')).toBe(hashed('a/b'))
  })

  it('never records a value or a key that could hold data, only hashes of it', () => {
    const secret = 'tok_live_4f1c9a@example.com'
    const pointers = compareAnswers(json({ users: { [secret]: { plan: 'gold' } } }), json({ users: { [secret]: { plan: 'silver' } } }), noIgnore)
    expect(pointers).toEqual([`/users/${hashed(secret)}/plan`])
    expect(pointers.join()).not.toContain('gold')
    expect(pointers.join()).not.toContain('tok_live')
  })

  it('hashes a plain segment that is a credential (a service key, the request\'s token used as a map key)', () => {
    const isCredential = (name: string): boolean => name.startsWith('key_') || name === 'tok-of-this-request'
    expect(recordedSegment('key_live_4f1c9a', isCredential)).toBe(hashed('key_live_4f1c9a'))
    expect(recordedSegment('usage', isCredential)).toBe('usage')
    const pointers = compareAnswers(
      json({ usage: { key_live_4f1c9a: { left: 3 }, 'tok-of-this-request': 1 } }),
      json({ usage: { key_live_4f1c9a: { left: 2 }, 'tok-of-this-request': 2 } }),
      noIgnore,
      isCredential
    )
    expect(pointers).toEqual([`/usage/${hashed('key_live_4f1c9a')}/left`, `/usage/${hashed('tok-of-this-request')}`])
  })

  it('hashes names that are not well-formed UTF-16 apart from each other', () => {
    expect(recordedSegment('\ud800')).not.toBe(recordedSegment('\udc00'))
  })
})
