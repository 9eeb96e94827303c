import type { CredentialDirectory } from './credential-directory.js'
import type { PolicyStore } from './policy-store.js'
import type { SessionStore } from './session-store.js'
import type { EffectiveContext } from './types.js'

/** What the route handlers of one simulator share. */
export interface SimulatorState {
  readonly credentials: CredentialDirectory
  readonly sessions: SessionStore
  readonly policies: PolicyStore
  readonly backendDefaults: Readonly<EffectiveContext>
}
