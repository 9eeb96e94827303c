import { describe, expect, it } from 'vitest'
import { GatewayError } from '../../../src/errors/registry.js'
import { Exchange } from '../../../src/kernel/exchange.js'
import type { CallsPlan, Plan, PlanFacts } from '../../../src/plan/plan-request.js'
import { createMemoryIdempotencyStore } from '../../../src/sessions/idempotency-store.js'
import type { SessionMap } from '../../../src/sessions/session-map.js'
import { runPlan, type RunDeps } from '../../../src/traffic/run-plan.js'
import type { UpstreamClient, UpstreamRequest, UpstreamResponse } from '../../../src/upstream/upstream-client.js'
import { send } from '../../helpers/http.js'
import { startHttpServer } from '../../helpers/http-server.js'

/** The runner, one case per kind of plan, on a real node:http request; the upstream is a recording stand-in. */
const FACTS: PlanFacts = { tenant: 'acme', requestedTenant: undefined, trafficClass: 'legacy', legacyRoute: 'POST /v1/x', action: 'execute', v4Path: undefined, clientFingerprint: 'f'.repeat(64), clientId: 'fp:ffffffffffffffff', clientExempt: false, credential: 'session-token', deprecation: undefined, migration: undefined }
const HEADERS = { 'x-request-id': 'req-run', deprecation: '@1' }

interface Seen {
  errors: unknown[]
  streamed: unknown[]
  upstream: UpstreamRequest[]
  exchange?: Exchange
}

/** Serves one request by running `plan` on it; answers the runner leaves unanswered are ended 599 by the deps. */
async function run(plan: Plan, body?: string): Promise<{ seen: Seen; answer: Awaited<ReturnType<typeof send>> }> {
  const seen: Seen = { errors: [], streamed: [], upstream: [] }
  const upstream = {
    request: async (request: UpstreamRequest): Promise<UpstreamResponse> => {
      seen.upstream.push(request)
      return { statusCode: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"output":1}') }
    }
  } as unknown as UpstreamClient
  const deps: RunDeps = {
    upstream,
    sessions: {} as SessionMap<UpstreamResponse>,
    idempotency: createMemoryIdempotencyStore(),
    isDraining: () => false,
    answerError: (exchange, error) => {
      seen.errors.push(error)
      exchange.response.writeHead(599, exchange.answerHeaders).end()
    },
    forwardStream: (exchange, call) => {
      seen.streamed.push(call)
      exchange.response.writeHead(299).end()
    }
  }
  const server = await startHttpServer((request, response) => {
    seen.exchange = new Exchange(request, response)
    runPlan(plan, seen.exchange, deps)
  })
  const answer = await send(server.url, '/v1/x', { method: 'POST', body, headers: { 'content-type': 'application/json' } })
  return { seen, answer }
}

const executePlan: CallsPlan = {
  kind: 'calls',
  facts: FACTS,
  answerHeaders: HEADERS,
  origin: 'http://upstream.test',
  timeoutMs: 1_000,
  responseFields: [],
  sessionLink: undefined,
  calls: { action: 'execute', execution: { method: 'POST', path: '/v4/execute', headers: { authorization: 'Bearer t' }, body: '{"input":1}' } }
}

describe('runPlan', () => {
  it('answers a refusal with its error, the plan headers on, and its facts on the record', async () => {
    const error = new GatewayError('AUTH_INVALID', 'no token')
    const { seen, answer } = await run({ kind: 'refuse', facts: FACTS, answerHeaders: HEADERS, error })
    expect(seen.errors).toEqual([error])
    expect(answer.headers).toMatchObject(HEADERS)
    expect(seen.exchange!.record).toMatchObject({ tenant: 'acme', trafficClass: 'legacy', legacyRoute: 'POST /v1/x', clientFingerprint: 'f'.repeat(64) })
  })

  it('hands a streamed call to the forwarder as planned', async () => {
    const call = { origin: 'http://upstream.test', method: 'POST', target: '/v4/x?a=1', headers: {}, timeoutMs: 5 }
    const { seen, answer } = await run({ kind: 'stream', facts: { ...FACTS, trafficClass: 'native' }, answerHeaders: {}, call })
    expect(answer.status).toBe(299)
    expect(seen.streamed).toEqual([call])
  })

  it('makes the planned execute call and writes the shaped answer with the plan headers and a length', async () => {
    const { seen, answer } = await run(executePlan)
    expect(seen.upstream).toMatchObject([{ origin: 'http://upstream.test', method: 'POST', path: '/v4/execute', body: '{"input":1}', timeoutMs: 1_000 }])
    expect(answer.status).toBe(200)
    expect(answer.headers).toMatchObject({ ...HEADERS, 'content-length': String(Buffer.byteLength(answer.text)) })
    expect(answer.json).toMatchObject({ output: 1, meta: { requestId: seen.exchange!.id } })
    expect(seen.exchange!.record.v4Path).toBe('/v4/execute')
  })

  it('reads the body of a read-body plan and answers the refusal its bytes get, sending nothing', async () => {
    const refusal = new GatewayError('INVALID_REQUEST', 'bad body')
    let bytes = ''
    const plan: Plan = {
      kind: 'read-body',
      facts: FACTS,
      answerHeaders: HEADERS,
      limitBytes: 100,
      withBody: (body) => {
        bytes = body.toString()
        return { kind: 'refuse', facts: FACTS, answerHeaders: HEADERS, error: refusal }
      }
    }
    const { seen } = await run(plan, '{"input":')
    expect(bytes).toBe('{"input":')
    expect(seen.errors).toEqual([refusal])
    expect(seen.upstream).toEqual([])
  })
})
