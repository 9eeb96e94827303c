import { describe, expect, it } from 'vitest'
import { SimulatorError } from '../../../src/simulator/errors.js'
import { PolicyStore } from '../../../src/simulator/policy-store.js'

describe('the simulator’s policy list is bounded (SPEC 10: no memory growth without bound)', () => {
  it('refuses a create past maxPolicies, the seeded default counted, and keeps every policy it had', () => {
    const store = new PolicyStore({ maxPolicies: 3, maxChars: 1_000_000 })
    store.create('one', {})
    store.create('two', {})
    expect(() => store.create('three', {})).toThrow(SimulatorError)
    expect(store.list().map((policy) => policy.name)).toEqual(['default', 'one', 'two'])
  })

  it('refuses a create whose fields would pass maxChars, and takes a smaller one after it', () => {
    const store = new PolicyStore({ maxPolicies: 100, maxChars: 500 })
    let refused: unknown
    try {
      store.create('big', { text: 'x'.repeat(500) })
    } catch (error) {
      refused = error
    }
    expect(refused).toMatchObject({ code: 'LIMIT_REACHED', statusCode: 409 })
    expect(store.create('small', { text: 'x'.repeat(100) })).toMatchObject({ name: 'small' })
    expect(store.list()).toHaveLength(2)
  })
})
