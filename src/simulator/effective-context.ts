import type { EffectiveContext, GovernanceDefaults } from './types.js'

/**
 * Contract part 4: a per-call value wins, else the session's default, else the backend default.
 * Risk has no per-call value on session executions, so callers leave it out there.
 */
export function buildEffectiveContext (
  perCall: GovernanceDefaults,
  sessionDefaults: GovernanceDefaults,
  backendDefaults: EffectiveContext
): EffectiveContext {
  return {
    policy: perCall.policy ?? sessionDefaults.policy ?? backendDefaults.policy,
    route: perCall.route ?? sessionDefaults.route ?? backendDefaults.route,
    risk: perCall.risk ?? sessionDefaults.risk ?? backendDefaults.risk
  }
}
