import { describe, expect, it } from 'vitest'
import type { GatewayError } from '../../../src/errors/registry.js'
import { parseJsonObjectText, pointerAtOffset } from '../../../src/legacy/parse-legacy-body.js'

/** The pointer parseJsonObjectText names for a body with one number JSON cannot carry. */
function refusedAt(text: string): string | undefined {
  try {
    parseJsonObjectText(Buffer.from(text))
  } catch (error) {
    return (error as GatewayError).details?.[0]?.pointer
  }
  throw new Error(`${text} was accepted`)
}

describe('a number JSON cannot carry is refused at its JSON pointer', () => {
  it.each([
    ['{"policy":1e400}', '/policy'],
    ['{ "input" : 1 , "risk" :\n 12345678901234567890 }', '/risk'],
    ['{"stateId":-1e400}', '/stateId'],
    ['{"input":{"a":[{"b":1},[2,3],"x,]}\\"{",1e-400]}}', '/input/a/3'],
    ['{"we\\"ird,:{[":{"":[0,0.1234567890123456789]}}', '/we"ird,:{[//1'],
    ['{"a":[],"b":{},"c":[[],{"d":1}],"e":1e999}', '/e'],
    ['{"input":1,"input":1e400}', '/input'],
    ['{"\\u0061~/":1e400}', '/a~0~1']
  ])('%s: %s', (text, pointer) => {
    expect(refusedAt(text)).toBe(pointer)
  })

  it('names the whole body ("") for a value that is not in a container', () => {
    expect(pointerAtOffset('1e400', 0)).toBe('')
  })

  it('still says what was sent, cut to 24 characters', () => {
    const error = (() => {
      try {
        parseJsonObjectText(Buffer.from(`{"input":${'9'.repeat(40)}}`))
      } catch (caught) {
        return caught as GatewayError
      }
      throw new Error('accepted')
    })()
    expect(error.details?.[0]?.message).toBe(`number out of range or too precise: ${'9'.repeat(24)}…`)
  })
})
