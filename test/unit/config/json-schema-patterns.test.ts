import { describe, expect, it } from 'vitest'
import { anyCase, wholeNumberPattern } from '../../../src/config/json-schema-patterns.js'

describe('wholeNumberPattern', () => {
  it.each([
    [0, 65535],
    [1, 2147483647],
    [400, 599],
    [5, 123],
    [7, 7]
  ])('matches exactly the whole numbers from %i to %i, as Number() reads the text', (min, max) => {
    const pattern = new RegExp(wholeNumberPattern(min, max), 'u')
    const wrong = []
    for (let value = 0; value <= 70_000; value++) if (pattern.test(String(value)) !== (value >= min && value <= max)) wrong.push(value)
    for (const value of [max - 1, max, max + 1, 2_147_483_648, 99_999_999_999]) if (value >= 0 && pattern.test(String(value)) !== (value >= min && value <= max)) wrong.push(value)
    expect(wrong).toEqual([])
    expect(pattern.test(`00${max}`)).toBe(true)
  })

  it('reaches the largest safe integer and not one past it', () => {
    const pattern = new RegExp(wholeNumberPattern(1, Number.MAX_SAFE_INTEGER), 'u')
    expect(['1', '9007199254740991', '9007199254740990', '8999999999999999'].map((text) => pattern.test(text))).toEqual([true, true, true, true])
    expect(['0', '9007199254740992', '10000000000000000', '', '-1', '1.5', ' 1'].map((text) => pattern.test(text))).toEqual([false, false, false, false, false, false, false])
  })
})

describe('anyCase', () => {
  it('matches the text in any letter case and escapes what a pattern would read', () => {
    const pattern = new RegExp(`^${anyCase('session-execute.v1')}$`, 'u')
    expect(['session-execute.v1', 'SESSION-Execute.V1'].every((text) => pattern.test(text))).toBe(true)
    expect(pattern.test('session-executeXv1')).toBe(false)
  })
})
