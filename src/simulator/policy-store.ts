import { SimulatorError } from './errors.js'
import { newId } from './meta.js'

export interface SimulatorPolicy {
  id: string
  name: string
  [field: string]: unknown
}

export interface PolicyStoreBounds {
  /** Policies kept, the seeded default included. */
  maxPolicies: number
  /** Their JSON text, in UTF-16 code units (near enough to bytes for a bound). */
  maxChars: number
}

/**
 * The simulator keeps what it is given for the life of its process, and the embedded one answers
 * anyone holding the demo key: without a bound, a loop of 1 MiB creates grew the gateway's own
 * memory without end (SPEC 10), and each list copied all of it. A create past the bound is
 * refused, never a policy dropped (docs/decisions.md).
 */
export const DEFAULT_POLICY_BOUNDS: PolicyStoreBounds = Object.freeze({ maxPolicies: 1000, maxChars: 16 * 1024 * 1024 })

/** The example admin/config surface (SPEC 11): an in-memory list of policies. */
export class PolicyStore {
  readonly #policies: SimulatorPolicy[] = [{ id: 'pol_default', name: 'default' }]
  readonly #bounds: PolicyStoreBounds
  #chars = JSON.stringify(this.#policies[0]).length

  constructor (bounds: PolicyStoreBounds = DEFAULT_POLICY_BOUNDS) {
    this.#bounds = bounds
  }

  list (): SimulatorPolicy[] {
    return this.#policies.map((policy) => structuredClone(policy))
  }

  /** Caller fields are kept; `id` is always the store's own. */
  create (name: string, fields: Record<string, unknown>): SimulatorPolicy {
    const policy: SimulatorPolicy = { ...structuredClone(fields), id: newId('pol'), name }
    const chars = JSON.stringify(policy).length
    if (this.#policies.length >= this.#bounds.maxPolicies || this.#chars + chars > this.#bounds.maxChars) {
      throw new SimulatorError(
        'LIMIT_REACHED',
        `the simulator keeps at most ${this.#bounds.maxPolicies} policies and ${this.#bounds.maxChars} characters of them; restart it to start again`
      )
    }
    this.#policies.push(policy)
    this.#chars += chars
    return structuredClone(policy)
  }
}
