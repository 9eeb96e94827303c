import { describe, expect, it } from 'vitest'
import { isGatewayError } from '../../src/errors/registry.js'
import { upstreamFailureCause } from '../../src/upstream/map-upstream-error.js'
import { createUpstreamClient, type UpstreamRequest } from '../../src/upstream/upstream-client.js'
import { resetConnection, startFaultUpstream } from '../helpers/fault-upstream.js'

/*
 * SPEC 17 counts upstream failures; a call the gateway cut itself at the end of the grace period
 * (SPEC 9) is none. A call can outlive its client (a shared sessions.start, a keyed call), so
 * whether the client is gone cannot tell: the cut's own error does.
 */

function call(origin: string): UpstreamRequest {
  return { origin, method: 'POST', path: '/v4/sessions.start', headers: { 'content-type': 'application/json' }, body: '{}', timeoutMs: 5_000 }
}

async function failureOf(answered: Promise<unknown>): Promise<unknown> {
  try {
    await answered
  } catch (error) {
    return error
  }
  throw new Error('the call did not fail')
}

describe('a call cut at shutdown', () => {
  it('fails as SHUTTING_DOWN (the gateway\'s own cut) with no upstream failure cause, where a reset is UPSTREAM_UNAVAILABLE with one', async () => {
    const upstream = await startFaultUpstream(() => {})
    const client = createUpstreamClient({ connectTimeoutMs: 5_000 })
    const cut = failureOf(client.request(call(upstream.url)))
    await upstream.nextExchange()
    await client.destroy()
    const error = await cut
    expect(isGatewayError(error) && error.code).toBe('SHUTTING_DOWN')
    expect(isGatewayError(error) && upstreamFailureCause(error)).toBeUndefined()

    const other = createUpstreamClient({ connectTimeoutMs: 5_000 })
    upstream.setHandler(resetConnection)
    const reset = await failureOf(other.request(call(upstream.url)))
    await other.destroy()
    expect(isGatewayError(reset) && reset.code).toBe('UPSTREAM_UNAVAILABLE')
    expect(isGatewayError(reset) && upstreamFailureCause(reset)).toBe('reset')
  })
})
