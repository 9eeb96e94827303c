import { newId } from './meta.js'

export interface SimulatorPolicy {
  id: string
  name: string
  [field: string]: unknown
}

/** The example admin/config surface (SPEC 11): an in-memory list of policies. */
export class PolicyStore {
  readonly #policies: SimulatorPolicy[] = [{ id: 'pol_default', name: 'default' }]

  list (): SimulatorPolicy[] {
    return this.#policies.map((policy) => structuredClone(policy))
  }

  /** Caller fields are kept; `id` is always the store's own. */
  create (name: string, fields: Record<string, unknown>): SimulatorPolicy {
    const policy: SimulatorPolicy = { ...structuredClone(fields), id: newId('pol'), name }
    this.#policies.push(policy)
    return structuredClone(policy)
  }
}
