import { ROOT_CONTEXT, SamplingDecision } from '@opentelemetry/api'
import { TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import type { CallNames } from '../../../src/tracing/request-span.js'
import { createTracing, type Tracing } from '../../../src/tracing/tracing.js'
import type { UpstreamRequest } from '../../../src/upstream/upstream-client.js'

/*
 * The gateway decides a request's sampling itself (tracing.ts, trace-ids.ts), so that an
 * unsampled request costs no SDK objects; these hold that decision to the SDK's own samplers.
 */

let tracing: Tracing | undefined

function started(sampleRatio: number): Tracing {
  tracing = createTracing({
    // Nothing is exported here: the batch delay outlasts the test, and shutdown drops what waits.
    config: { enabled: true, endpoint: 'http://127.0.0.1:9/v1/traces', protocol: 'http/protobuf', sampleRatio, serviceName: 'test', headers: {}, maxQueueSpans: 4096, batchDelayMs: 60_000, trustIncoming: false, forwardBaggage: false },
    version: 'test',
    logger: pino({ level: 'silent' }),
    onSpansDropped: () => {}
  })
  return tracing
}

afterEach(async () => {
  await tracing?.shutdown()
  tracing = undefined
})

const HEAD = { method: 'POST', startedAt: 0, headers: {} }

const NAMES: CallNames = { buffered: (request) => ({ name: `${request.method} ${request.path}` }), streamed: () => 'GET /v4/*', queryCredential: null, shadow: false }

function call(method: string, path: string): UpstreamRequest {
  return { origin: 'http://127.0.0.1:1', method, path, headers: {}, body: null, timeoutMs: 1_000 }
}

describe('sampling a new root', () => {
  it('records exactly the requests whose trace id TraceIdRatioBased samples, in the trace the ratio was asked about', () => {
    const ratio = new TraceIdRatioBasedSampler(0.5)
    const gateway = started(0.5)
    const requests = Array.from({ length: 400 }, () => gateway.startRequest(HEAD, { sampleRatio: 0.5, trustIncoming: false }, null))
    for (const request of requests) {
      const sampled = ratio.shouldSample(ROOT_CONTEXT, request.traceId).decision === SamplingDecision.RECORD_AND_SAMPLED
      expect(request.recording).toBe(sampled)
      expect(request.callTracer(() => NAMES).traceCall(call('POST', '/v4/execute'), false).traceparent).toMatch(
        new RegExp(`^00-${request.traceId}-[0-9a-f]{16}-${sampled ? '01' : '00'}$`)
      )
    }
    // Half of them: had the SDK drawn a trace id of its own after the gateway sampled one, only
    // those both draws sample would be recorded, a quarter (binomial, 400 draws: 200 ± 10 at 0.5,
    // 100 ± 9 at 0.25; outside 140-260 at 0.5 about once in 10^9).
    const recorded = requests.filter((request) => request.recording).length
    expect(recorded).toBeGreaterThan(140)
    expect(recorded).toBeLessThan(260)
  })

  it('gives every unsampled request and call its own ids', () => {
    const gateway = started(0)
    const requests = Array.from({ length: 50 }, () => gateway.startRequest(HEAD, { sampleRatio: 0, trustIncoming: false }, null))
    expect(requests.every((request) => !request.recording)).toBe(true)
    expect(new Set(requests.map((request) => request.traceId)).size).toBe(50)
    const calls = requests[0]?.callTracer(() => NAMES)
    const [first, second] = [calls?.traceCall(call('GET', '/v4/x'), true).traceparent, calls?.traceCall(call('GET', '/v4/x'), true).traceparent]
    expect(first).not.toBe(second)
    expect(first?.split('-')[2]).not.toBe(requests[0]?.spanId)
  })
})

describe('a trusted parent', () => {
  it('decides by its sampled flag, whatever the ratio', () => {
    const gateway = started(0)
    const parent = (flags: string): { traceparent: string } => ({ traceparent: `00-${'a'.repeat(32)}-${'b'.repeat(16)}-${flags}` })
    const sampled = gateway.startRequest({ ...HEAD, headers: parent('01') }, { sampleRatio: 0, trustIncoming: true }, null)
    expect(sampled).toMatchObject({ recording: true, traceId: 'a'.repeat(32) })
    const unsampled = gateway.startRequest({ ...HEAD, headers: parent('00') }, { sampleRatio: 1, trustIncoming: true }, null)
    expect(unsampled).toMatchObject({ recording: false, traceId: 'a'.repeat(32) })
  })
})

// SPEC 17: every span that is not exported is counted. The SDK's processor takes none after its
// shutdown, silently: a keyed call that outlived its client can end after the last export began.
describe('a span that ends after the shutdown began', () => {
  it('is counted as dropped (shut_down), not lost without a count', async () => {
    const dropped: Array<[string, number]> = []
    const gateway = createTracing({
      config: { enabled: true, endpoint: 'http://127.0.0.1:9/v1/traces', protocol: 'http/protobuf', sampleRatio: 1, serviceName: 'test', headers: {}, maxQueueSpans: 4096, batchDelayMs: 60_000, trustIncoming: false, forwardBaggage: false },
      version: 'test',
      logger: pino({ level: 'silent' }),
      onSpansDropped: (reason, count) => dropped.push([reason, count])
    })
    const late = gateway.startRequest(HEAD, { sampleRatio: 1, trustIncoming: false }, null)
    const shutdown = gateway.shutdown()
    late.end(undefined, 1)
    gateway.abandon()
    await shutdown
    expect(dropped).toContainEqual(['shut_down', 1])
  })
})
