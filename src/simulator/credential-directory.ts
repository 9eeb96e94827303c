import type { SimulatorIdentity } from './types.js'

export type ServiceKeyLookup =
  | { status: 'active'; identity: SimulatorIdentity }
  | { status: 'revoked' }
  | { status: 'unknown' }

/** What auth decisions may ask about credentials; implemented by CredentialDirectory. */
export interface CredentialLookup {
  findSessionToken(token: string): SimulatorIdentity | undefined
  lookupServiceKey(key: string): ServiceKeyLookup
}

/** The simulator's known session tokens and service keys, and which keys were revoked. */
export class CredentialDirectory implements CredentialLookup {
  readonly #sessionTokens: ReadonlyMap<string, SimulatorIdentity>
  readonly #serviceKeys: ReadonlyMap<string, SimulatorIdentity>
  readonly #revokedKeys = new Set<string>()

  constructor (
    sessionTokens: ReadonlyMap<string, SimulatorIdentity>,
    serviceKeys: ReadonlyMap<string, SimulatorIdentity>
  ) {
    this.#sessionTokens = sessionTokens
    this.#serviceKeys = serviceKeys
  }

  findSessionToken (token: string): SimulatorIdentity | undefined {
    return this.#sessionTokens.get(token)
  }

  lookupServiceKey (key: string): ServiceKeyLookup {
    const identity = this.#serviceKeys.get(key)
    // Only a key that was minted can have been revoked; any other value stays merely unknown.
    if (identity === undefined) return { status: 'unknown' }
    if (this.#revokedKeys.has(key)) return { status: 'revoked' }
    return { status: 'active', identity }
  }

  /** Contract part 3: token active -> revoked; later admin/config calls with it are rejected. */
  revokeKey (key: string): void {
    this.#revokedKeys.add(key)
  }
}
