import { describe, expect, it } from 'vitest'
import { OneEntryMemo } from '../../../src/util/one-entry-memo.js'

function counting(): { compute: (input: string) => string; inputs: string[] } {
  const inputs: string[] = []
  return { inputs, compute: (input) => (inputs.push(input), `f(${input})`) }
}

describe('OneEntryMemo', () => {
  it('computes an input once while it repeats', () => {
    const memo = new OneEntryMemo()
    const { compute, inputs } = counting()
    expect([memo.of('a', compute), memo.of('a', compute), memo.of('a', compute)]).toEqual(['f(a)', 'f(a)', 'f(a)'])
    expect(inputs).toEqual(['a'])
  })

  it('computes again for another input, and for the first one after it: it keeps one entry', () => {
    const memo = new OneEntryMemo()
    const { compute, inputs } = counting()
    expect(['a', 'b', 'a', 'a', 'b'].map((input) => memo.of(input, compute))).toEqual(['f(a)', 'f(b)', 'f(a)', 'f(a)', 'f(b)'])
    expect(inputs).toEqual(['a', 'b', 'a', 'b'])
  })

  it('compares the input by value, so an equal string built anew is a repeat', () => {
    const memo = new OneEntryMemo()
    const { compute, inputs } = counting()
    memo.of(['to', 'ken'].join(''), compute)
    memo.of(`tok${'en'}`, compute)
    expect(inputs).toEqual(['token'])
  })

  it('computes the empty string too: nothing is remembered before the first call', () => {
    const memo = new OneEntryMemo()
    const { compute, inputs } = counting()
    expect(memo.of('', compute)).toBe('f()')
    expect(inputs).toEqual([''])
  })

  it('computes again when given another function, so a memo handed to the wrong digest never answers with the other one', () => {
    const memo = new OneEntryMemo()
    const upper = (input: string): string => input.toUpperCase()
    const reversed = (input: string): string => [...input].reverse().join('')
    expect([memo.of('ab', upper), memo.of('ab', reversed), memo.of('ab', reversed), memo.of('ab', upper)]).toEqual(['AB', 'ba', 'ba', 'AB'])
  })

  it('never shows what it holds when printed', async () => {
    const { inspect } = await import('node:util')
    const memo = new OneEntryMemo()
    memo.of('tok_secret_value', (input) => `digest-of-${input.length}`)
    expect(JSON.stringify(memo)).not.toContain('tok_secret_value')
    expect(inspect({ memo }, { depth: 5 })).not.toContain('tok_secret_value')
  })

  it('remembers nothing of a computation that threw', () => {
    const memo = new OneEntryMemo()
    let calls = 0
    const failing = (): string => {
      calls++
      throw new Error('no')
    }
    expect(() => memo.of('a', failing)).toThrow('no')
    expect(() => memo.of('a', failing)).toThrow('no')
    expect(calls).toBe(2)
  })
})
