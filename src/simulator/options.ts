import { deepFreeze } from '../util/deep-freeze.js'
import type { EffectiveContext, SimulatorIdentity, SimulatorOptions } from './types.js'

export const SERVICE_KEY_PREFIX = 'key_'
export const SERVICE_ACCOUNT_PREFIX = 'sa_'

/**
 * The demo identities that `npm start` and the README curl examples rely on: keep the literal
 * values. Frozen, so that spreading it into new options is the only way to vary it.
 */
export const DEFAULT_SIMULATOR_OPTIONS: Required<SimulatorOptions> = deepFreeze({
  sessionTokens: {
    'demo-token-alice': { subject: 'user_alice', roles: ['admin'] },
    'demo-token-bob': { subject: 'user_bob', roles: [] }
  },
  serviceKeys: {
    key_demo_admin: { subject: 'sa_demo', roles: ['admin'] }
  },
  backendDefaults: { policy: 'default', route: 'standard', risk: 'low' },
  sessionTtlMs: 3_600_000,
  logger: false,
  recordCalls: true,
  controlRoutes: true
})

export interface ResolvedSimulatorOptions {
  sessionTokens: ReadonlyMap<string, SimulatorIdentity>
  serviceKeys: ReadonlyMap<string, SimulatorIdentity>
  backendDefaults: Readonly<EffectiveContext>
  sessionTtlMs: number
  logger: boolean
  recordCalls: boolean
  controlRoutes: boolean
}

// Maps rather than records: a token like `constructor` must not find Object.prototype's member.
function copyIdentities (identities: Record<string, SimulatorIdentity>): Map<string, SimulatorIdentity> {
  return new Map(Object.entries(identities).map(([secret, identity]) => [
    secret,
    { subject: identity.subject, roles: [...identity.roles] }
  ]))
}

/**
 * Fills the defaults of each option not given (a given option replaces its default whole) and
 * refuses credentials that the auth rules could never accept, so a test misconfiguration fails
 * loudly instead of as a puzzling 401.
 */
export function resolveSimulatorOptions (options: SimulatorOptions = {}): ResolvedSimulatorOptions {
  const sessionTokens = copyIdentities(options.sessionTokens ?? DEFAULT_SIMULATOR_OPTIONS.sessionTokens)
  const serviceKeys = copyIdentities(options.serviceKeys ?? DEFAULT_SIMULATOR_OPTIONS.serviceKeys)
  const sessionTtlMs = options.sessionTtlMs ?? DEFAULT_SIMULATOR_OPTIONS.sessionTtlMs

  for (const token of sessionTokens.keys()) {
    if (token.startsWith(SERVICE_KEY_PREFIX) || token.startsWith(SERVICE_ACCOUNT_PREFIX)) {
      throw new TypeError(`simulator sessionTokens: a session token may not start with ${SERVICE_KEY_PREFIX} or ${SERVICE_ACCOUNT_PREFIX}`)
    }
  }
  for (const key of serviceKeys.keys()) {
    if (!key.startsWith(SERVICE_KEY_PREFIX)) {
      throw new TypeError(`simulator serviceKeys: every service key must start with ${SERVICE_KEY_PREFIX}`)
    }
  }
  if (!Number.isFinite(sessionTtlMs) || sessionTtlMs < 0) {
    throw new RangeError('simulator sessionTtlMs must be a finite number >= 0')
  }

  return {
    sessionTokens,
    serviceKeys,
    backendDefaults: Object.freeze({ ...(options.backendDefaults ?? DEFAULT_SIMULATOR_OPTIONS.backendDefaults) }),
    sessionTtlMs,
    logger: options.logger ?? DEFAULT_SIMULATOR_OPTIONS.logger,
    recordCalls: options.recordCalls ?? DEFAULT_SIMULATOR_OPTIONS.recordCalls,
    controlRoutes: options.controlRoutes ?? DEFAULT_SIMULATOR_OPTIONS.controlRoutes
  }
}
