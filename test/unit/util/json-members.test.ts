import { describe, expect, it } from 'vitest'
import { parsedMemberCount, readJsonTextMembers } from '../../../src/util/json-members.js'

describe('readJsonTextMembers and parsedMemberCount', () => {
  it.each([
    ['{}', 0, []],
    ['{"a":1}', 1, ['a']],
    [' { "a" : 1 , "b" : [ 1 , { "c" : 2 , "d" : -3 } ] } ', 4, ['a', 'b']],
    ['{"a":"x,\\"y\\":1.5e3","b":{"c":"}{"}}', 3, ['a', 'b']],
    ['{"a\\\\":"\\\\","b":"\\\\\\""}', 2, ['a\\\\', 'b']],
    ['{"a":[],"b":{},"c":"[{", "d":[true,false,null]}', 4, ['a', 'b', 'c', 'd']],
    ['{"":1,"__proto__":{"x":0}}', 3, ['', '__proto__']]
  ])('%s: %i names, the top-level ones as written, as many as JSON.parse kept', (text, all, names) => {
    expect(readJsonTextMembers(text, 64)).toEqual({ all, topLevelNames: names })
    expect(parsedMemberCount(JSON.parse(text))).toBe(all)
  })

  it('counts a repeated name each time it is written, where JSON.parse keeps one', () => {
    expect(readJsonTextMembers('{"a":1,"a":2}', 64)?.all).toBe(2)
    expect(parsedMemberCount(JSON.parse('{"a":1,"a":2}'))).toBe(1)
    expect(readJsonTextMembers('{"a":{"b":1,"b":2}}', 64)?.all).toBe(3)
    expect(parsedMemberCount(JSON.parse('{"a":{"b":1,"b":2}}'))).toBe(2)
  })

  it.each(['{"a":1.0}', '{"a":[1e2]}', '{"a":1E2}', '{"a":-0}', '{"a":{"b":-0.5}}', '{"a":1000000000000000000000}'])('says undefined for %s, a number JSON.stringify writes otherwise', (text) => {
    expect(readJsonTextMembers(text, 64)).toBeUndefined()
  })

  it('takes integers up to 21 digits, negative ones, digits in strings, and true and false as they are', () => {
    expect(readJsonTextMembers('{"a":[0,-1,10,-20],"b":true,"c":false}', 64)).toEqual({ all: 3, topLevelNames: ['a', 'b', 'c'] })
    // 10^20 is written as it is; 10^21 (above) is not.
    expect(readJsonTextMembers('{"a":100000000000000000000,"b":"1234567890123456789012345"}', 64)).toEqual({ all: 2, topLevelNames: ['a', 'b'] })
  })

  it('says undefined past maxDepth', () => {
    expect(readJsonTextMembers('{"a":[[[1]]]}', 4)?.all).toBe(1)
    expect(readJsonTextMembers('{"a":[[[[1]]]]}', 4)).toBeUndefined()
  })
})
