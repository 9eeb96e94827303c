import { describe, expect, it } from 'vitest'
import { topLevelMemberCount } from '../../../src/util/json-members.js'

describe('topLevelMemberCount', () => {
  it.each([
    ['{}', 0],
    ['{"a":1}', 1],
    [' { "a" : 1 , "b" : [ 1 , { "c" : 2 , "d" : 3 } ] } ', 2],
    ['{"a":1,"a":2}', 2],
    ['{"a":"x,\\"y\\":1","b":{"c":"}{"}}', 2],
    ['{"a\\\\":"\\\\","b":"\\\\\\""}', 2],
    ['{"a":[],"b":{},"c":"[{"}', 3],
    ['{"":1,"__proto__":{}}', 2]
  ])('%s has %i', (text, count) => {
    // The texts are JSON.parse's to accept; the count agrees with it wherever no name repeats.
    const object = JSON.parse(text) as Record<string, unknown>
    expect(topLevelMemberCount(text, 64)).toBe(count)
    if (!/"a":1,"a"/.test(text)) expect(Object.keys(object)).toHaveLength(count)
  })

  it('says -1 past maxDepth', () => {
    expect(topLevelMemberCount('{"a":[[[1]]]}', 4)).toBe(1)
    expect(topLevelMemberCount('{"a":[[[[1]]]]}', 4)).toBe(-1)
  })
})
