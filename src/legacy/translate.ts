import type { LegacyCall } from './parse-legacy-body.js'

export interface SessionDefaults {
  policy?: string
  route?: string
  risk?: string
}

/** Copies `value` into `target` without its undefined members: "only the fields given" (SPEC 4). */
function assignDefined<T extends Record<string, unknown>>(target: T, value: Record<string, unknown>): T {
  for (const key in value) {
    if (value[key] !== undefined) (target as Record<string, unknown>)[key] = value[key]
  }
  return target
}

/** `POST /v4/execute` body: `{ input, policy?, route?, risk? }`, only the fields given (SPEC 4). */
export function translateExecute(call: LegacyCall): Record<string, unknown> {
  return assignDefined({ ...call.unknown, input: call.input }, { policy: call.policy, route: call.route, risk: call.risk })
}

/** Session defaults: `state` merged with a top-level `risk` (SPEC 4 session-execute step 1). */
export function translateSessionDefaults(call: LegacyCall): SessionDefaults {
  return assignDefined<SessionDefaults & Record<string, unknown>>({}, { policy: call.state?.policy, route: call.state?.route, risk: call.risk ?? call.state?.risk })
}

/**
 * `executions.execute` body: policy/route only when given at top level, so that the
 * session's defaults apply otherwise (SPEC 4 step 4). Unknown fields ride along.
 */
export function translateSessionExecute(call: LegacyCall): Record<string, unknown> {
  return assignDefined({ ...call.unknown, input: call.input }, { policy: call.policy, route: call.route })
}
