import type { RequestHead } from '../kernel/request-head.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import { planRequest, type CallsPlan, type IdempotentPlan, type RefusePlan } from './plan-request.js'

/**
 * SPEC 15's candidate: exactly what stage `translate` would answer this request, from the same
 * planner that serves translated traffic (its refusals included: a `key_*` credential is a 401
 * with no V4 call), with its V4 calls sent to `origin`, the shadow upstream. `body` is the
 * request body the legacy upstream received.
 */
export function planShadowCandidate(runtime: GatewayRuntime, head: RequestHead, body: Buffer, origin: string): RefusePlan | CallsPlan | IdempotentPlan {
  const plan = planRequest(runtime, head, { shadowCandidate: { origin } })
  switch (plan.kind) {
    case 'read-body':
      return plan.withBody(body)
    case 'refuse':
    case 'calls':
    case 'idempotent':
      return plan
    case 'stream':
      // Only execute and session-execute are compared, and `translate` streams neither.
      throw new Error('a shadow candidate was planned as a streamed call')
  }
}
