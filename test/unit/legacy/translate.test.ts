import { describe, expect, it } from 'vitest'
import type { LegacyCall } from '../../../src/legacy/parse-legacy-body.js'
import { translateExecute, translateSessionDefaults, translateSessionExecute } from '../../../src/legacy/translate.js'

function call(fields: Partial<LegacyCall>): LegacyCall {
  return { input: { q: 1 }, unknown: {}, ...fields }
}

describe('translateExecute', () => {
  it('sends only input when nothing else was given', () => {
    expect(translateExecute(call({}))).toEqual({ input: { q: 1 } })
  })

  it('sends policy, route and risk when given', () => {
    expect(translateExecute(call({ policy: 'p', route: 'r', risk: 'high' }))).toEqual({ input: { q: 1 }, policy: 'p', route: 'r', risk: 'high' })
  })

  it('keeps a null input', () => {
    expect(translateExecute(call({ input: null }))).toEqual({ input: null })
  })

  it('carries the unknown fields along', () => {
    expect(translateExecute(call({ unknown: { trace: 't' } }))).toEqual({ trace: 't', input: { q: 1 } })
  })
})

describe('translateSessionDefaults', () => {
  it('is empty when neither state nor risk was given', () => {
    expect(translateSessionDefaults(call({}))).toEqual({})
  })

  it('takes the state fields that were given', () => {
    expect(translateSessionDefaults(call({ state: { policy: 'p' } }))).toEqual({ policy: 'p' })
  })

  it('merges a top-level risk into the state', () => {
    expect(translateSessionDefaults(call({ state: { policy: 'p', route: 'r' }, risk: 'high' }))).toEqual({ policy: 'p', route: 'r', risk: 'high' })
  })

  it('lets a top-level risk win over the state risk', () => {
    expect(translateSessionDefaults(call({ state: { risk: 'low' }, risk: 'high' }))).toEqual({ risk: 'high' })
  })

  it('never takes top-level policy or route, which are per-call overrides', () => {
    expect(translateSessionDefaults(call({ policy: 'p', route: 'r' }))).toEqual({})
  })

  it('never takes unknown fields', () => {
    expect(translateSessionDefaults(call({ unknown: { trace: 't' }, state: { route: 'r' } }))).toEqual({ route: 'r' })
  })
})

describe('translateSessionExecute', () => {
  it('sends only input when no per-call policy or route was given', () => {
    expect(translateSessionExecute(call({ state: { policy: 'p', route: 'r', risk: 'high' }, risk: 'high' }))).toEqual({ input: { q: 1 } })
  })

  it('sends top-level policy and route as per-call overrides', () => {
    expect(translateSessionExecute(call({ policy: 'p', route: 'r' }))).toEqual({ input: { q: 1 }, policy: 'p', route: 'r' })
  })

  it('never sends risk, which belongs to the session', () => {
    expect(translateSessionExecute(call({ risk: 'high' }))).not.toHaveProperty('risk')
  })

  it('carries the unknown fields along', () => {
    expect(translateSessionExecute(call({ unknown: { trace: 't' } }))).toEqual({ trace: 't', input: { q: 1 } })
  })
})
