import type { RequestHead } from '../kernel/request-head.js'
import { readStateKey } from '../legacy/legacy-calls.js'
import { parseRuntimeBody } from '../legacy/prepare-legacy-call.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import { classifyRequest } from './classify-request.js'
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

const NO_BODY = Object.freeze({ body: Object.freeze({}), call: Object.freeze({}) })

/**
 * The state key of a session-execute request that `translate` would refuse, read as its calls
 * would have read it, where the request shows one: from a path parameter or a header whatever the
 * refusal, from a body that parses (a refused credential, a brownout). SPEC 15 samples a state on
 * every request or on none, its refused ones included; undefined when the refusal leaves no state
 * to read (the body is what is wrong).
 */
export function refusedStateKey(runtime: GatewayRuntime, head: RequestHead, body: Buffer): string | undefined {
  try {
    const classification = classifyRequest(runtime, head, { trafficClass: undefined, tenant: undefined })
    if (classification.trafficClass !== 'legacy' || classification.match.route.action !== 'session-execute') return undefined
    const { tenant, match } = classification
    const { route } = match
    // Only a `body:` source reads the body, which must then parse as translate would parse it.
    const { body: object, call } = route.stateKey?.startsWith('body:') === true ? parseRuntimeBody(body, tenant, route) : NO_BODY
    return readStateKey({ route, params: match.params, requestHeaders: head.headers, call, body: object })
  } catch {
    return undefined
  }
}
