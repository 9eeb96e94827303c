import { describe, expect, it } from 'vitest'
import { send, type Answer } from '../helpers/http.js'
import { buildRawRequest, rawExchange } from '../helpers/raw-http.js'
import { useStaleableV4Upstream } from '../helpers/stale-v4-upstream.js'
import type { RecordedRequest } from '../helpers/recording-upstream.js'
import { testConfig, useGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { until } from '../helpers/until.js'

// Issue 25 point 10, SPEC 17 first paragraph: every V4 call a legacy request becomes carries the
// client's traceparent and tracestate unchanged (baggage only with tracing.forwardBaggage), and
// the request's access line carries the trace id of a valid traceparent.

const ALICE = { authorization: 'Bearer demo-token-alice' }
const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`
// What tracestate and baggage hold is the client's: they never reach a log line.
const TRACESTATE = 'vendor=secret-tracestate-7f3a,other=x'
const BAGGAGE = 'userId=secret-baggage-91c2,tier=gold'
const TRACE_HEADERS = { traceparent: TRACEPARENT, tracestate: TRACESTATE, baggage: BAGGAGE }

const v4Upstream = useStaleableV4Upstream

/** The access line of the request answered with `answer` (or of the request id given, for a native answer, which is the upstream's). */
async function accessLine(gw: StartedGateway, answer: Answer | string): Promise<Record<string, unknown>> {
  const requestId = typeof answer === 'string' ? answer : answer.headers['x-request-id']
  let line: Record<string, unknown> | undefined
  await until(() => (line = gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === requestId)) !== undefined)
  return line as Record<string, unknown>
}

describe('trace context on the V4 calls of a legacy request', () => {
  const { upstream, staleOnce } = v4Upstream()
  // `trace`: every line the gateway can write, to show that none holds tracestate or baggage.
  const gw = useGateway(() => testConfig(upstream.url, { log: { level: 'trace' } }))
  const withBaggage = useGateway(() => testConfig(upstream.url, { tracing: { forwardBaggage: true } }))
  // A proxy route's rewrite is a V4 call made for a legacy request too.
  const proxyRoute = (forwardBaggage: boolean) =>
    testConfig(upstream.url, { tracing: { forwardBaggage }, tenants: { acme: { upstream: { staging: upstream.url }, legacy: { routes: [{ method: 'GET', path: '/v1/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id' }] } } } })
  const proxied = useGateway(() => proxyRoute(false))
  const proxiedWithBaggage = useGateway(() => proxyRoute(true))

  /** The V4 calls a request made: those recorded while it ran. */
  async function calls(run: () => Promise<Answer>): Promise<{ answer: Answer; made: RecordedRequest[] }> {
    const before = upstream.requests.length
    const answer = await run()
    return { answer, made: upstream.requests.slice(before) }
  }

  function invoke(target: StartedGateway, path: string, json: unknown, headers: Record<string, string> = TRACE_HEADERS) {
    return send(target.url, path, { headers: { ...ALICE, ...headers }, json })
  }

  it('execute: the one V4 call carries traceparent and tracestate unchanged, and no baggage', async () => {
    const { answer, made } = await calls(() => invoke(gw, '/v1/headless/runs', { input: 1 }))
    expect(answer.status).toBe(200)
    expect(made.map((call) => call.url)).toEqual(['/v4/execute'])
    expect(made[0]?.headers).toMatchObject({ traceparent: TRACEPARENT, tracestate: TRACESTATE })
    expect(made[0]?.headers.baggage).toBeUndefined()
    expect((await accessLine(gw, answer)).traceId).toBe(TRACE_ID)
  })

  it('session-execute: sessions.start, the execution, and the new start and execution after a stale session all carry them', async () => {
    const first = await calls(() => invoke(gw, '/v1/runs/invoke', { input: 1, stateId: 'traced' }))
    expect(first.made.map((call) => call.url)).toEqual(['/v4/sessions.start', expect.stringMatching(/executions\.execute$/)])
    const sessionId = first.answer.headers['x-v4-session-id'] as string
    staleOnce.add(sessionId)
    const other = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-00`
    const second = await calls(() => invoke(gw, '/v1/runs/invoke', { input: 2, stateId: 'traced' }, { traceparent: other, tracestate: 'v=2' }))
    expect(second.answer.status).toBe(200)
    expect(second.made.map((call) => call.url)).toEqual([
      `/v4/sessions/${sessionId}/executions.execute`,
      '/v4/sessions.start',
      expect.stringMatching(/executions\.execute$/)
    ])
    for (const call of first.made) expect(call.headers).toMatchObject({ traceparent: TRACEPARENT, tracestate: TRACESTATE })
    for (const call of second.made) expect(call.headers).toMatchObject({ traceparent: other, tracestate: 'v=2' })
    for (const call of [...first.made, ...second.made]) expect(call.headers.baggage).toBeUndefined()
    expect((await accessLine(gw, second.answer)).traceId).toBe('a'.repeat(32))
  })

  it('forwards baggage too with tracing.forwardBaggage: true', async () => {
    const { made } = await calls(() => invoke(withBaggage, '/v1/runs/invoke', { input: 1, stateId: 'baggage' }))
    expect(made).toHaveLength(2)
    for (const call of made) expect(call.headers).toMatchObject({ traceparent: TRACEPARENT, tracestate: TRACESTATE, baggage: BAGGAGE })
  })

  it('a proxy route: its V4 call carries traceparent and tracestate, and baggage only with forwardBaggage', async () => {
    const plain = await calls(() => send(proxied.url, '/v1/policies/p-7', { headers: { ...ALICE, ...TRACE_HEADERS } }))
    expect(plain.made.map((call) => call.url)).toEqual(['/v4/policies/p-7'])
    expect(plain.made[0]?.headers).toMatchObject({ traceparent: TRACEPARENT, tracestate: TRACESTATE })
    expect(plain.made[0]?.headers.baggage).toBeUndefined()
    const forwarded = await calls(() => send(proxiedWithBaggage.url, '/v1/policies/p-7', { headers: { ...ALICE, ...TRACE_HEADERS } }))
    expect(forwarded.made[0]?.headers).toMatchObject({ traceparent: TRACEPARENT, tracestate: TRACESTATE, baggage: BAGGAGE })
  })

  it.each([
    [`00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, 'an all-zero trace id'],
    [`00-${TRACE_ID.toUpperCase()}-00f067aa0ba902b7-01`, 'upper-case hex'],
    ['not a traceparent', 'garbage']
  ])('forwards an invalid traceparent (%s: %s) unchanged, with its tracestate, and logs no traceId', async (traceparent) => {
    const { answer, made } = await calls(() => invoke(gw, '/v1/headless/runs', { input: 1 }, { traceparent, tracestate: TRACESTATE }))
    expect(answer.status).toBe(200)
    expect(made[0]?.headers).toMatchObject({ traceparent, tracestate: TRACESTATE })
    expect(await accessLine(gw, answer)).not.toHaveProperty('traceId')
  })

  it('sends no trace headers when the client sent none, and logs no traceId', async () => {
    const { answer, made } = await calls(() => invoke(gw, '/v1/headless/runs', { input: 1 }, {}))
    for (const name of ['traceparent', 'tracestate', 'baggage']) expect(made[0]?.headers[name]).toBeUndefined()
    expect(await accessLine(gw, answer)).not.toHaveProperty('traceId')
  })

  it('puts traceId on the access line of native traffic and of a refused request too', async () => {
    const native = await send(gw.url, '/v4/anything', { headers: { ...ALICE, ...TRACE_HEADERS, 'x-request-id': 'native-traced-1' } })
    expect(native.status).toBe(200)
    expect(await accessLine(gw, 'native-traced-1')).toMatchObject({ class: 'native', traceId: TRACE_ID })
    const refused = await invoke(gw, '/v1/headless/runs', { policy: 'no input' })
    expect(refused.status).toBe(400)
    expect(await accessLine(gw, refused)).toMatchObject({ error: 'INVALID_REQUEST', traceId: TRACE_ID })
  })

  it('puts traceId on the access line of a request the kernel refuses before planning (two Host fields)', async () => {
    const request = buildRawRequest('GET /v4/anything HTTP/1.1', [['Host', 'a.test'], ['Host', 'b.test'], ['x-request-id', 'two-hosts-1'], ['traceparent', TRACEPARENT]])
    const { response } = await rawExchange(gw.url, request)
    expect(response?.status).toBe(400)
    expect(await accessLine(gw, 'two-hosts-1')).toMatchObject({ status: 400, traceId: TRACE_ID })
  })

  it('writes tracestate and baggage on no log line', async () => {
    const withIt = await invoke(withBaggage, '/v1/headless/runs', { input: 1 })
    const without = await invoke(gw, '/v1/headless/runs', { input: 1 })
    // These requests' own lines are in before the logs are read.
    await accessLine(withBaggage, withIt)
    await accessLine(gw, without)
    for (const text of [gw.logs.text(), withBaggage.logs.text()]) {
      expect(text).not.toContain('secret-tracestate')
      expect(text).not.toContain('secret-baggage')
    }
  })
})
