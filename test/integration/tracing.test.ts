import { writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { join } from 'node:path'
import { request as undiciRequest } from 'undici'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { answerJson, refusingOrigin, startFaultUpstream, type FaultUpstream } from '../helpers/fault-upstream.js'
import { send, type Answer } from '../helpers/http.js'
import { startOtlpReceiver, useOtlpReceiver, type ExportedSpan, type OtlpReceiver } from '../helpers/otlp-receiver.js'
import { buildRawRequest, rawExchange } from '../helpers/raw-http.js'
import { useStaleableV4Upstream } from '../helpers/stale-v4-upstream.js'
import { useRecordingUpstream, type RecordedRequest } from '../helpers/recording-upstream.js'
import { startGateway, testConfig, useGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

// Issue 30 points 1, 2, 5 and 7 (SPEC 17): the spans a traced gateway exports, read back from a
// real OTLP/HTTP receiver on loopback in both encodings, and the traceparent each upstream got.

const ALICE = { authorization: 'Bearer demo-token-alice' }
const CLIENT_TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'
const CLIENT_PARENT_ID = '00f067aa0ba902b7'
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/

const v4Upstream = useStaleableV4Upstream

function tracedConfig(upstreamUrl: string, receiver: OtlpReceiver, tracing: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  return testConfig(upstreamUrl, { tracing: { enabled: true, endpoint: receiver.endpoint, sampleRatio: 1, batchDelayMs: 20, ...tracing }, ...extra })
}

/** The spans of one trace once its SERVER span (the last to end) has arrived. */
async function traceOf(receiver: OtlpReceiver, traceId: string): Promise<ExportedSpan[]> {
  await until(() => receiver.spans.some((span) => span.traceId === traceId && span.kind === 'SERVER'))
  return receiver.spans.filter((span) => span.traceId === traceId)
}

async function accessLine(gw: StartedGateway, requestId: string): Promise<Record<string, unknown>> {
  let line: Record<string, unknown> | undefined
  await until(() => (line = gw.logs.lines().find((entry) => entry.msg === 'request' && entry.requestId === requestId)) !== undefined)
  return line as Record<string, unknown>
}

/** What a request made: its answer, the upstream calls recorded while it ran, and its access line. */
async function run(gw: StartedGateway, upstream: { requests: RecordedRequest[] }, request: () => Promise<Answer>) {
  const before = upstream.requests.length
  const answer = await request()
  const made = upstream.requests.slice(before)
  const line = await accessLine(gw, answer.headers['x-request-id'] as string)
  return { answer, made, line }
}

function parsedTraceparent(call: RecordedRequest | undefined): { traceId: string; spanId: string; flags: string } {
  const match = TRACEPARENT.exec(String(call?.headers.traceparent))
  expect(match, `traceparent ${String(call?.headers.traceparent)}`).not.toBeNull()
  const [, traceId, spanId, flags] = match as unknown as [string, string, string, string]
  return { traceId, spanId, flags }
}

describe('tracing on, OTLP/HTTP protobuf (the default)', () => {
  const { upstream, staleOnce } = v4Upstream()
  const receiver = useOtlpReceiver()
  const gw = useGateway(() => tracedConfig(upstream.url, receiver, {}, { credentials: { queryParam: 'access_token' }, tenants: { acme: { upstream: { staging: upstream.url }, legacy: { routes: [
    { method: 'POST', path: '/v1/headless/runs', action: 'execute' },
    { method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/stateId' },
    { method: 'GET', path: '/v1/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id' }
  ] } } } }))

  it('execute: one SERVER span named by the route template, one CLIENT span under it, and the V4 call carries a traceparent naming the CLIENT span', async () => {
    const { answer, made, line } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'user-agent': 'legacy-sdk/1.4' }, json: { input: 1 } }))
    expect(answer.status).toBe(200)
    const sent = parsedTraceparent(made[0])
    expect(sent.flags).toBe('01')
    const spans = await traceOf(receiver, sent.traceId)
    const server = spans.find((span) => span.kind === 'SERVER') as ExportedSpan
    const client = spans.find((span) => span.kind === 'CLIENT') as ExportedSpan
    expect(spans).toHaveLength(2)
    expect(server.name).toBe('POST /v1/headless/runs')
    expect(server.parentSpanId).toBe('')
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'url.path': '/v1/headless/runs',
      'url.scheme': 'http',
      'http.route': '/v1/headless/runs',
      'http.response.status_code': 200,
      'server.address': '127.0.0.1',
      'client.address': expect.stringMatching(/127\.0\.0\.1/),
      'user_agent.original': 'legacy-sdk/1.4',
      'v4gw.tenant': 'acme',
      'v4gw.traffic_class': 'legacy',
      'v4gw.legacy.route': 'POST /v1/headless/runs',
      'v4gw.credential.type': 'session'
    })
    expect(server.attributes['server.port']).toBe(Number(new URL(gw.url).port))
    expect(server.attributes).not.toHaveProperty('error.type')
    expect(client.name).toBe('POST /v4/execute')
    expect(client.parentSpanId).toBe(server.spanId)
    expect(client.spanId).toBe(sent.spanId)
    expect(client.attributes).toMatchObject({ 'http.request.method': 'POST', 'url.full': `${upstream.url}/v4/execute`, 'server.address': '127.0.0.1', 'http.response.status_code': 200 })
    expect(server.resource).toMatchObject({ 'service.name': 'v4gw', 'service.version': expect.any(String) })
    // Point 7: the access line joins the trace.
    expect(line).toMatchObject({ traceId: sent.traceId, spanId: server.spanId })
  })

  it('session-execute after a stale session: sessions.start, execution, the 404 execution, a new start and the execution again with http.request.resend_count, each upstream call naming its own span', async () => {
    const first = await run(gw, upstream, () => send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'traced' } }))
    staleOnce.add(first.answer.headers['x-v4-session-id'] as string)
    const { answer, made } = await run(gw, upstream, () => send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 2, stateId: 'traced' } }))
    expect(answer.status).toBe(200)
    expect(made.map((call) => call.url)).toEqual([expect.stringMatching(/executions\.execute$/), '/v4/sessions.start', expect.stringMatching(/executions\.execute$/)])
    const sent = made.map(parsedTraceparent)
    const traceId = sent[0]?.traceId as string
    for (const call of sent) expect(call.traceId).toBe(traceId)
    const spans = await traceOf(receiver, traceId)
    const server = spans.find((span) => span.kind === 'SERVER') as ExportedSpan
    expect(server.name).toBe('POST /v1/runs/invoke')
    expect(server.attributes).toMatchObject({ 'v4gw.session.outcome': 'stale-retry', 'v4gw.credential.type': 'session' })
    const clients = sent.map((call) => spans.find((span) => span.spanId === call.spanId) as ExportedSpan)
    expect(clients.map((span) => [span.kind, span.name, span.parentSpanId])).toEqual([
      ['CLIENT', 'POST /v4/sessions/{sessionId}/executions.execute', server.spanId],
      ['CLIENT', 'POST /v4/sessions.start', server.spanId],
      ['CLIENT', 'POST /v4/sessions/{sessionId}/executions.execute', server.spanId]
    ])
    expect(clients[0]?.attributes).toMatchObject({ 'http.response.status_code': 404, 'error.type': '404' })
    expect(clients[0]?.statusCode).toBe(2)
    expect(clients[0]?.attributes).not.toHaveProperty('http.request.resend_count')
    expect(clients[2]?.attributes).toMatchObject({ 'http.request.resend_count': 1, 'http.response.status_code': 200 })
    // The span names a template, never the session id.
    for (const span of spans) expect(span.name).not.toMatch(/\/s\d+\//)
  })

  it('native passthrough: SERVER and CLIENT spans named METHOD /v4/*, and traceparent is the one header rewritten: tracestate and baggage pass unchanged', async () => {
    const headers = { ...ALICE, traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT_ID}-01`, tracestate: 'vendor=v1', baggage: 'tier=gold' }
    const before = upstream.requests.length
    const answer = await send(gw.url, '/v4/things/42?view=full', { headers: { ...headers, 'x-request-id': 'native-traced-1' } })
    expect(answer.status).toBe(200)
    const call = upstream.requests[before] as RecordedRequest
    expect(call.url).toBe('/v4/things/42?view=full')
    expect(call.headers).toMatchObject({ tracestate: 'vendor=v1', baggage: 'tier=gold', authorization: ALICE.authorization })
    const sent = parsedTraceparent(call)
    const spans = await traceOf(receiver, sent.traceId)
    const server = spans.find((span) => span.kind === 'SERVER') as ExportedSpan
    const client = spans.find((span) => span.kind === 'CLIENT') as ExportedSpan
    expect(server).toMatchObject({ name: 'GET /v4/*', attributes: expect.objectContaining({ 'http.route': '/v4/*', 'url.path': '/v4/things/42', 'url.query': 'view=full', 'v4gw.traffic_class': 'native' }) })
    expect(client).toMatchObject({ name: 'GET /v4/*', parentSpanId: server.spanId, spanId: sent.spanId })
    expect(client.attributes['url.full']).toBe(`${upstream.url}/v4/things/42?view=full`)
    expect((await accessLine(gw, 'native-traced-1')).spanId).toBe(server.spanId)
  })

  it('native passthrough with a client’s own x-v4gw-shadow: the header goes on unchanged, and the call’s span is not marked a comparison’s', async () => {
    const before = upstream.requests.length
    expect((await send(gw.url, '/v4/things/7', { headers: { ...ALICE, 'x-v4gw-shadow': '1' } })).status).toBe(200)
    const call = upstream.requests[before]
    expect(call?.headers['x-v4gw-shadow']).toBe('1')
    const sent = parsedTraceparent(call)
    const client = (await traceOf(receiver, sent.traceId)).find((span) => span.kind === 'CLIENT') as ExportedSpan
    expect(client).toMatchObject({ spanId: sent.spanId, name: 'GET /v4/*' })
    // SPEC 17: only a comparison's calls (SPEC 15) are shadow calls.
    expect(client.attributes).not.toHaveProperty('v4gw.shadow')
  })

  it('a proxy route: the CLIENT span is named by its rewrite template', async () => {
    const { made } = await run(gw, upstream, () => send(gw.url, '/v1/policies/p-7', { headers: ALICE }))
    const sent = parsedTraceparent(made[0])
    const spans = await traceOf(receiver, sent.traceId)
    expect(spans.find((span) => span.kind === 'SERVER')?.name).toBe('GET /v1/policies/:id')
    expect(spans.find((span) => span.kind === 'CLIENT')?.name).toBe('GET /v4/policies/:id')
  })

  it('trustIncoming false (the default): a new trace whatever the client says, sampled by the ratio even when the client’s flag is off, the client’s context as a link', async () => {
    const { made, line } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT_ID}-00` }, json: { input: 1 } }))
    const sent = parsedTraceparent(made[0])
    expect(sent.traceId).not.toBe(CLIENT_TRACE_ID)
    expect(sent.flags).toBe('01')
    const server = (await traceOf(receiver, sent.traceId)).find((span) => span.kind === 'SERVER') as ExportedSpan
    expect(server.parentSpanId).toBe('')
    expect(server.links).toEqual([{ traceId: CLIENT_TRACE_ID, spanId: CLIENT_PARENT_ID }])
    expect(line.traceId).toBe(sent.traceId)
  })

  it('puts url.query on spans without the query credential, and signature values redacted', async () => {
    const before = upstream.requests.length
    const legacy = await send(gw.url, '/v1/headless/runs?access_token=demo-token-alice&page=2', { json: { input: 1 } })
    expect(legacy.status).toBe(200)
    const native = await send(gw.url, '/v4/files?access_token=tok-in-query-9&Signature=sig-secret-3&y=2', { headers: ALICE })
    expect(native.status).toBe(200)
    const [legacyCall, nativeCall] = upstream.requests.slice(before)
    const legacySpans = await traceOf(receiver, parsedTraceparent(legacyCall).traceId)
    expect(legacySpans.find((span) => span.kind === 'SERVER')?.attributes).toMatchObject({ 'url.query': 'page=2', 'v4gw.credential.type': 'session' })
    const nativeSpans = await traceOf(receiver, parsedTraceparent(nativeCall).traceId)
    expect(nativeSpans.find((span) => span.kind === 'SERVER')?.attributes['url.query']).toBe('Signature=REDACTED&y=2')
    expect(nativeSpans.find((span) => span.kind === 'CLIENT')?.attributes['url.full']).toBe(`${upstream.url}/v4/files?Signature=REDACTED&y=2`)
    // Native traffic is passed on unchanged (SPEC 7): only the span leaves it out.
    expect(nativeCall?.url).toBe('/v4/files?access_token=tok-in-query-9&Signature=sig-secret-3&y=2')
  })

  it('a request the gateway refuses has its SERVER span with error.type, the credential kind, and no CLIENT span', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { 'x-request-id': 'refused-traced-1' }, json: { input: 1 } })
    expect(answer.status).toBe(401)
    const line = await accessLine(gw, 'refused-traced-1')
    const spans = await traceOf(receiver, line.traceId as string)
    expect(spans).toHaveLength(1)
    expect(spans[0]).toMatchObject({ kind: 'SERVER', spanId: line.spanId, name: 'POST /v1/headless/runs' })
    expect(spans[0]?.attributes).toMatchObject({ 'http.response.status_code': 401, 'error.type': 'AUTH_INVALID', 'v4gw.credential.type': 'none' })
    // A 4xx is the client's: the SERVER span's status stays unset (semantic conventions).
    expect(spans[0]?.statusCode).toBe(0)
  })

  it('server.address and server.port follow each request\'s own Host, one after another', async () => {
    const hosts: [string, string, number][] = [
      ['gw.example:8443', 'gw.example', 8443],
      ['gw.example:8443', 'gw.example', 8443],
      ['[::1]:9000', '::1', 9000],
      ['plain.example', 'plain.example', 80],
      ['gw.example:8443', 'gw.example', 8443]
    ]
    for (const [index, [host, address, port]] of hosts.entries()) {
      const request = buildRawRequest('GET /v4/anything HTTP/1.1', [['Host', host], ['authorization', ALICE.authorization], ['x-request-id', `host-${index}`]])
      const { response } = await rawExchange(gw.url, request)
      expect(response?.status).toBe(200)
      const line = await accessLine(gw, `host-${index}`)
      const server = (await traceOf(receiver, line.traceId as string)).find((span) => span.kind === 'SERVER')
      expect(server?.attributes, host).toMatchObject({ 'server.address': address, 'server.port': port })
    }
  })

  it('a request the kernel refuses before planning (two Host fields) still has its SERVER span, without a server.address taken from it', async () => {
    const request = buildRawRequest('GET /v4/anything HTTP/1.1', [['Host', 'a.test'], ['Host', 'b.test'], ['x-request-id', 'two-hosts-traced']])
    const { response } = await rawExchange(gw.url, request)
    expect(response?.status).toBe(400)
    const line = await accessLine(gw, 'two-hosts-traced')
    const [span] = await traceOf(receiver, line.traceId as string)
    // Planned as a refusal (the kernel's other early refusals are): named by its class, as the line says it.
    expect(line).toMatchObject({ tenant: 'acme', class: 'native' })
    expect(span).toMatchObject({ kind: 'SERVER', name: 'GET /v4/*', spanId: line.spanId })
    expect(span?.attributes).toMatchObject({ 'http.response.status_code': 400, 'error.type': 'INVALID_REQUEST' })
    expect(span?.attributes).not.toHaveProperty('server.address')
  })

  it('sends no client baggage on the V4 calls of a legacy request (forwardBaggage false)', async () => {
    const { made } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, baggage: 'userId=u-1' }, json: { input: 1 } }))
    expect(made[0]?.headers.baggage).toBeUndefined()
  })
})

describe('tracing on, trusting the client (trustIncoming: true)', () => {
  const { upstream } = v4Upstream()
  const receiver = useOtlpReceiver()
  const gw = useGateway(() => tracedConfig(upstream.url, receiver, { trustIncoming: true, forwardBaggage: true }))

  it('continues the client’s trace: the SERVER span’s parent is the client’s span, and the V4 call carries the client’s trace id', async () => {
    const { made, line } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT_ID}-01`, baggage: 'tier=gold' }, json: { input: 1 } }))
    const sent = parsedTraceparent(made[0])
    expect(sent).toMatchObject({ traceId: CLIENT_TRACE_ID, flags: '01' })
    const spans = await traceOf(receiver, CLIENT_TRACE_ID)
    const server = spans.find((span) => span.kind === 'SERVER') as ExportedSpan
    expect(server.parentSpanId).toBe(CLIENT_PARENT_ID)
    expect(server.links).toEqual([])
    expect(spans.find((span) => span.kind === 'CLIENT')?.spanId).toBe(sent.spanId)
    expect(line).toMatchObject({ traceId: CLIENT_TRACE_ID, spanId: server.spanId })
    expect(made[0]?.headers.baggage).toBe('tier=gold')
  })

  it('follows the client’s sampled flag: off, nothing is exported, yet the V4 call carries a traceparent (flag 00) naming a span of the client’s trace', async () => {
    const unsampledTrace = 'a'.repeat(32)
    const { made, line } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, traceparent: `00-${unsampledTrace}-${'b'.repeat(16)}-00` }, json: { input: 1 } }))
    const sent = parsedTraceparent(made[0])
    expect(sent).toMatchObject({ traceId: unsampledTrace, flags: '00' })
    expect(sent.spanId).not.toBe('b'.repeat(16))
    expect(line).toMatchObject({ traceId: unsampledTrace, spanId: expect.stringMatching(/^[0-9a-f]{16}$/) })
    // A sampled request after it: once its spans are in, the batches before them were too.
    const later = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 2 } }))
    await traceOf(receiver, parsedTraceparent(later.made[0]).traceId)
    expect(receiver.spans.filter((span) => span.traceId === unsampledTrace)).toEqual([])
  })
})

describe('tracing on at sampleRatio 0', () => {
  const { upstream } = v4Upstream()
  const receiver = useOtlpReceiver()
  const gw = useGateway(() =>
    tracedConfig(upstream.url, receiver, { sampleRatio: 0 }, { tenants: { acme: { upstream: { staging: upstream.url }, legacy: { routes: [
      { method: 'POST', path: '/v1/headless/runs', action: 'execute' },
      { method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/stateId' }
    ] } } } })
  )

  it('native passthrough: the streamed call carries a traceparent (flag 00) in the trace the access line names, with a span id of its own', async () => {
    // A native answer is the upstream's: the request id the client sent finds its access line.
    const before = upstream.requests.length
    const answer = await send(gw.url, '/v4/execute', { headers: { ...ALICE, 'x-request-id': 'native-unsampled' }, json: { input: 1 } })
    expect(answer.status).toBe(200)
    const line = await accessLine(gw, 'native-unsampled')
    const sent = parsedTraceparent(upstream.requests[before])
    expect(sent.flags).toBe('00')
    expect(line.traceId).toBe(sent.traceId)
    expect(line.spanId).toMatch(/^[0-9a-f]{16}$/)
    expect(sent.spanId).not.toBe(line.spanId)
  })

  it('a session start and its execution: each call names a span of its own in the request’s trace', async () => {
    const { made, line } = await run(gw, upstream, () => send(gw.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'unsampled' } }))
    expect(made.map((call) => call.url)).toEqual(['/v4/sessions.start', expect.stringMatching(/executions\.execute$/)])
    const [start, execution] = made.map(parsedTraceparent) as [ReturnType<typeof parsedTraceparent>, ReturnType<typeof parsedTraceparent>]
    expect([start.traceId, execution.traceId]).toEqual([line.traceId, line.traceId])
    expect([start.flags, execution.flags]).toEqual(['00', '00'])
    expect(new Set([start.spanId, execution.spanId, line.spanId]).size).toBe(3)
  })

  it('exports nothing, and still sends each upstream call a traceparent (flag 00) whose ids the access line carries', async () => {
    const { made, line } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } }))
    const sent = parsedTraceparent(made[0])
    expect(sent.flags).toBe('00')
    expect(line.traceId).toBe(sent.traceId)
    expect(line.spanId).toMatch(/^[0-9a-f]{16}$/)
    await gw.close()
    expect(receiver.spans).toEqual([])
  })
})

describe('tracing on, OTLP/HTTP JSON', () => {
  const { upstream } = v4Upstream()
  const receiver = useOtlpReceiver()
  const gw = useGateway(() => tracedConfig(upstream.url, receiver, { protocol: 'http/json', serviceName: 'edge-gw' }))

  it('exports the same spans as JSON: names, kinds, parent link, attributes and resource', async () => {
    const { made } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } }))
    const sent = parsedTraceparent(made[0])
    const spans = await traceOf(receiver, sent.traceId)
    expect(receiver.requests.every((request) => request.contentType?.startsWith('application/json'))).toBe(true)
    const server = spans.find((span) => span.kind === 'SERVER') as ExportedSpan
    expect(server).toMatchObject({ name: 'POST /v1/headless/runs', parentSpanId: '', attributes: expect.objectContaining({ 'http.response.status_code': 200, 'v4gw.credential.type': 'session' }) })
    expect(server.resource['service.name']).toBe('edge-gw')
    expect(spans.find((span) => span.kind === 'CLIENT')).toMatchObject({ name: 'POST /v4/execute', parentSpanId: server.spanId, spanId: sent.spanId })
  })
})

describe('tracing on, with SPEC 14 stages', () => {
  const { upstream } = v4Upstream()
  const legacyUpstream = useRecordingUpstream((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify({ from: 'legacy' }))
  })
  const receiver = useOtlpReceiver()
  const gw = useGateway(() =>
    tracedConfig(upstream.url, receiver, {}, {
      tenancy: { default: 'old' },
      tenants: {
        old: {
          upstream: { staging: upstream.url, legacy: legacyUpstream.url },
          legacy: { routes: [{ method: 'POST', path: '/v1/headless/runs', action: 'execute' }, { method: 'GET', path: '/v1/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id' }] },
          migration: { stage: 'legacy' }
        },
        moved: { upstream: { staging: upstream.url, legacy: legacyUpstream.url }, migration: { stage: 'translate' } }
      }
    })
  )

  it('stage legacy: v4gw.migration.stage and v4gw.served_by on the SERVER span, the legacy upstream’s call a CLIENT span named METHOD /v1/… carrying its traceparent', async () => {
    const before = legacyUpstream.requests.length
    const answer = await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
    expect(answer.status).toBe(200)
    const sent = parsedTraceparent(legacyUpstream.requests[before])
    const spans = await traceOf(receiver, sent.traceId)
    const server = spans.find((span) => span.kind === 'SERVER') as ExportedSpan
    expect(server.attributes).toMatchObject({ 'v4gw.migration.stage': 'legacy', 'v4gw.served_by': 'legacy', 'v4gw.tenant': 'old' })
    expect(spans.find((span) => span.kind === 'CLIENT')).toMatchObject({ name: 'POST /v1/headless/runs', parentSpanId: server.spanId, spanId: sent.spanId })
  })

  it('stage legacy: a proxy route’s call to the legacy upstream is named by the route, not by its V4 rewrite', async () => {
    const before = legacyUpstream.requests.length
    expect((await send(gw.url, '/v1/policies/p-7', { headers: ALICE })).status).toBe(200)
    expect(legacyUpstream.requests[before]?.url).toBe('/v1/policies/p-7')
    const spans = await traceOf(receiver, parsedTraceparent(legacyUpstream.requests[before]).traceId)
    expect(spans.find((span) => span.kind === 'CLIENT')?.name).toBe('GET /v1/policies/:id')
  })

  it('stage translate: served_by v4', async () => {
    const { made } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-tenant-id': 'moved' }, json: { input: 1 } }))
    const server = (await traceOf(receiver, parsedTraceparent(made[0]).traceId)).find((span) => span.kind === 'SERVER')
    expect(server?.attributes).toMatchObject({ 'v4gw.migration.stage': 'translate', 'v4gw.served_by': 'v4' })
  })
})

describe('tracing off (the default)', () => {
  const { upstream } = v4Upstream()
  const gw = useGateway(() => testConfig(upstream.url))

  it('makes no span: the client’s traceparent goes on unchanged and the access line has its trace id and no spanId', async () => {
    const traceparent = `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT_ID}-01`
    const { made, line } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, traceparent }, json: { input: 1 } }))
    expect(made[0]?.headers.traceparent).toBe(traceparent)
    expect(line.traceId).toBe(CLIENT_TRACE_ID)
    expect(line).not.toHaveProperty('spanId')
  })
})

describe('tracing on, a request in stage shadow (SPEC 15, 17)', () => {
  const { upstream } = v4Upstream()
  const legacy = useRecordingUpstream((_request, response) => {
    response.setHeader('content-type', 'application/json')
    response.end(JSON.stringify({ output: 'done', meta: {} }))
  })
  const receiver = useOtlpReceiver()
  const gw = useGateway(() =>
    tracedConfig(upstream.url, receiver, {}, { tenants: { acme: { upstream: { staging: upstream.url, legacy: legacy.url }, migration: { stage: 'shadow' } } } })
  )

  it("makes the comparison's V4 call a CLIENT span of the request's SERVER span, marked v4gw.shadow, and names it in that call's traceparent", async () => {
    const before = upstream.requests.length
    const { answer, made } = await run(gw, legacy, () => send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } }))
    expect(answer.headers['x-v4gw-served-by']).toBe('legacy')
    const toLegacy = parsedTraceparent(made[0])
    // The comparison starts once the legacy answer is sent: its call reaches V4 after the answer.
    await until(() => upstream.requests.length > before)
    const shadowCall = upstream.requests[before] as RecordedRequest
    expect(shadowCall.headers['x-v4gw-shadow']).toBe('1')
    const sent = parsedTraceparent(shadowCall)
    expect(sent.traceId).toBe(toLegacy.traceId)
    await until(() => receiver.spans.some((span) => span.spanId === sent.spanId))
    const spans = receiver.spans.filter((span) => span.traceId === sent.traceId)
    const server = spans.find((span) => span.kind === 'SERVER') as ExportedSpan
    const shadow = spans.find((span) => span.spanId === sent.spanId) as ExportedSpan
    const legacyCall = spans.find((span) => span.spanId === toLegacy.spanId) as ExportedSpan
    expect(shadow).toMatchObject({ kind: 'CLIENT', name: 'POST /v4/execute', parentSpanId: server.spanId })
    expect(shadow.attributes).toMatchObject({ 'v4gw.shadow': true, 'http.response.status_code': 200 })
    expect(legacyCall).toMatchObject({ kind: 'CLIENT', name: 'POST /v1/headless/runs', parentSpanId: server.spanId })
    expect(legacyCall.attributes).not.toHaveProperty('v4gw.shadow')
    expect(server.attributes).toMatchObject({ 'v4gw.migration.stage': 'shadow', 'v4gw.served_by': 'legacy' })
  })
})

describe('tracing on, deprecation, idempotency and credential kinds on the SERVER span (SPEC 13, 16, 5)', () => {
  const { upstream } = v4Upstream()
  const receiver = useOtlpReceiver()
  const day = 24 * 3_600_000
  const gw = useGateway(() =>
    tracedConfig(upstream.url, receiver, {}, {
      tenants: {
        acme: {
          upstream: { staging: upstream.url },
          legacy: { deprecation: { date: new Date(Date.now() - day).toISOString(), sunset: new Date(Date.now() + 30 * day).toISOString() }, idempotency: {} }
        }
      }
    })
  )

  async function serverSpanOf(headers: Record<string, string>, requestId: string): Promise<ExportedSpan> {
    await send(gw.url, '/v1/headless/runs', { headers: { ...headers, 'x-request-id': requestId }, json: { input: 1 } })
    const line = await accessLine(gw, requestId)
    return (await traceOf(receiver, line.traceId as string)).find((span) => span.kind === 'SERVER') as ExportedSpan
  }

  it('names the deprecation action and the idempotency outcome: executed, then replayed', async () => {
    const keyed = { ...ALICE, 'idempotency-key': 'span-key-1' }
    expect((await serverSpanOf(keyed, 'span-keyed-1')).attributes).toMatchObject({ 'v4gw.deprecation.action': 'header', 'v4gw.idempotency.outcome': 'executed' })
    expect((await serverSpanOf(keyed, 'span-keyed-2')).attributes).toMatchObject({ 'v4gw.deprecation.action': 'header', 'v4gw.idempotency.outcome': 'replayed' })
  })

  it('names a refused credential by its kind, never its value', async () => {
    const serviceKey = await serverSpanOf({ authorization: 'Bearer key_span_secret_1' }, 'span-key-kind')
    expect(serviceKey.attributes).toMatchObject({ 'v4gw.credential.type': 'service-key', 'http.response.status_code': 401 })
    const account = await serverSpanOf({ authorization: 'Bearer sa_span_secret_2' }, 'span-sa-kind')
    expect(account.attributes).toMatchObject({ 'v4gw.credential.type': 'service-account-id', 'http.response.status_code': 401 })
    for (const body of receiver.bodies) {
      expect(body.includes('key_span_secret_1')).toBe(false)
      expect(body.includes('sa_span_secret_2')).toBe(false)
    }
  })
})

describe('tracing on, the lines a request writes besides its access line', () => {
  const receiver = useOtlpReceiver()

  it('carry the traceId and spanId of its SERVER span, as its access line does (issue 30 point 7)', async () => {
    const gw = await startGateway(tracedConfig(await refusingOrigin(), receiver, {}, { log: { level: 'debug' } }))
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-request-id': 'traced-failure-1' }, json: { input: 1 } })
    expect(answer.status).toBe(502)
    const line = await accessLine(gw, 'traced-failure-1')
    const failure = gw.logs.lines().find((entry) => entry.msg === 'upstream failure' && entry.requestId === 'traced-failure-1')
    expect(failure).toMatchObject({ traceId: line.traceId, spanId: line.spanId })
    const server = (await traceOf(receiver, line.traceId as string)).find((span) => span.kind === 'SERVER')
    expect(server?.spanId).toBe(line.spanId)
  })
})

describe('tracing on, an answer cut or never sent (semantic conventions: the status the client got)', () => {
  const receiver = useOtlpReceiver()

  /** Sends a legacy request whose client leaves once its call has reached `upstream`. */
  async function leaveOnceCalled(gw: StartedGateway, upstream: FaultUpstream, headers: Record<string, string>): Promise<void> {
    const controller = new AbortController()
    const sent = undiciRequest(new URL('/v1/headless/runs', gw.url), { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: '{"input":1}', signal: controller.signal }).catch(() => undefined)
    await upstream.nextExchange()
    controller.abort()
    await sent
  }

  /** A request's access line and SERVER span, once both are in. */
  async function endOf(gw: StartedGateway, requestId: string): Promise<{ line: Record<string, unknown>; server: ExportedSpan; clients: ExportedSpan[] }> {
    const line = await accessLine(gw, requestId)
    const spans = await traceOf(receiver, line.traceId as string)
    return { line, server: spans.find((span) => span.kind === 'SERVER') as ExportedSpan, clients: spans.filter((span) => span.kind === 'CLIENT') }
  }

  it('a native answer whose body the upstream cut: the 200 that was sent, error.type, and the span an error', async () => {
    const upstream = await startFaultUpstream((exchange) => {
      exchange.response.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' })
      exchange.response.write('{"output":', () => exchange.socket.destroy())
    })
    const gw = await startGateway(tracedConfig(upstream.url, receiver))
    const answer = await rawExchange(gw.url, buildRawRequest('GET /v4/things/cut HTTP/1.1', [['Host', 'gateway.test'], ['Authorization', ALICE.authorization], ['X-Request-Id', 'cut-body-1']]))
    expect(answer.response?.status).toBe(200)
    expect(answer.response?.complete).toBe(false)
    const { line, server } = await endOf(gw, 'cut-body-1')
    // The access line says whose failure it was (502, SPEC 6's code for an answer cut short).
    expect(line).toMatchObject({ status: 502, error: 'UPSTREAM_BAD_RESPONSE' })
    expect(server.attributes).toMatchObject({ 'http.response.status_code': 200, 'error.type': 'UPSTREAM_BAD_RESPONSE' })
    expect(server.statusCode).toBe(2)
  })

  it('a legacy request whose client left before its answer: no status on the span (its access line says 499), and no error', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await startGateway(tracedConfig(upstream.url, receiver))
    await leaveOnceCalled(gw, upstream, { ...ALICE, 'x-request-id': 'left-early-1' })
    const { line, server, clients } = await endOf(gw, 'left-early-1')
    expect(line.status).toBe(499)
    expect(server.attributes).not.toHaveProperty('http.response.status_code')
    expect(server.attributes).not.toHaveProperty('error.type')
    expect(server.statusCode).toBe(0)
    // The call its leaving cancelled says so, not that the upstream failed (it was UPSTREAM_UNAVAILABLE).
    expect(clients.map((span) => span.attributes['error.type'])).toEqual(['cancelled'])
  })

  // SPEC 4 step 3: the start is shared, so a client leaving does not cancel it; its CLIENT span
  // says how it went (until 2026-11-30 the SERVER span's end closed it, with no status).
  it('a session-execute whose client left while its sessions.start ran: the start’s CLIENT span ends with the start, its 500 on it', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await startGateway(tracedConfig(upstream.url, receiver))
    const controller = new AbortController()
    const sent = undiciRequest(new URL('/v1/runs/invoke', gw.url), { method: 'POST', headers: { ...ALICE, 'x-request-id': 'left-during-start-1', 'content-type': 'application/json' }, body: '{"input":1,"stateId":"left-during-start"}', signal: controller.signal }).catch(() => undefined)
    const start = await upstream.nextExchange()
    expect(start.url).toBe('/v4/sessions.start')
    controller.abort()
    await sent
    const line = await accessLine(gw, 'left-during-start-1')
    expect(line.status).toBe(499)
    answerJson(start, 500, { error: { code: 'BACKEND_DOWN', message: 'later' } })
    await until(async () => (await traceOf(receiver, line.traceId as string)).some((span) => span.kind === 'CLIENT'))
    const clients = (await traceOf(receiver, line.traceId as string)).filter((span) => span.kind === 'CLIENT')
    expect(clients.map((span) => [span.name, span.attributes['http.response.status_code'], span.attributes['error.type'], span.statusCode])).toEqual([['POST /v4/sessions.start', 500, '500', 2]])
  })

  it('a streamed native answer whose client left before its first body bytes: no status on the span (Node had not written the head), and no error', async () => {
    let headersOut: () => void = () => {}
    const headed = new Promise<void>((resolve) => (headersOut = resolve))
    const upstream = await startFaultUpstream((exchange) => {
      exchange.response.writeHead(200, { 'content-type': 'text/event-stream' })
      exchange.response.flushHeaders()
      headersOut()
    })
    const gw = await startGateway(tracedConfig(upstream.url, receiver))
    const controller = new AbortController()
    const sent = undiciRequest(new URL('/v4/events', gw.url), { headers: { ...ALICE, 'x-request-id': 'left-before-body-1' }, signal: controller.signal }).catch(() => undefined)
    await headed
    // The gateway has its head from the upstream; give it a moment to pass it on (it writes it with the first bytes).
    await new Promise((resolve) => setTimeout(resolve, 100))
    controller.abort()
    await sent
    const { line, server, clients } = await endOf(gw, 'left-before-body-1')
    expect(line.status).toBe(499)
    expect(server.attributes).not.toHaveProperty('http.response.status_code')
    expect(server.statusCode).toBe(0)
    // The streamed call its leaving cut: cancelled by the gateway (it was UPSTREAM_BAD_RESPONSE), its 200 kept.
    expect(clients.map((span) => [span.attributes['http.response.status_code'], span.attributes['error.type']])).toEqual([[200, 'cancelled']])
  })

  it.each([
    ['an upload undici reads as it came', 20_000],
    ['a long upload, read through a stream of its own', 200_000]
  ])('a native upload whose client left mid-body (%s): its CLIENT span says cancelled, not that the upstream failed', async (_kind, length) => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await startGateway(tracedConfig(upstream.url, receiver))
    const requestId = `left-mid-upload-${length}`
    const reached = new Promise<void>((resolve) => upstream.server.once('request', () => resolve()))
    const client = connect(Number(new URL(gw.url).port), '127.0.0.1')
    client.on('error', () => undefined)
    const head = `POST /v4/execute HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: ${ALICE.authorization}\r\nX-Request-Id: ${requestId}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`
    client.write(head + '{"input":"' + 'x'.repeat(1_000))
    await reached
    client.resetAndDestroy()
    const { line, clients } = await endOf(gw, requestId)
    expect(line.status).toBe(499)
    // undici ends the call with the body's error before the gateway's cancel: it was UPSTREAM_UNAVAILABLE.
    expect(clients.map((span) => span.attributes['error.type'])).toEqual(['cancelled'])
  })

  it('a keyed request whose client left and whose execution then timed out: no status, error.type, and the span an error (SPEC 16)', async () => {
    const upstream = await startFaultUpstream(() => {})
    const gw = await startGateway(
      tracedConfig(upstream.url, receiver, {}, { limits: { upstreamTimeoutMs: 300 }, tenants: { acme: { upstream: { staging: upstream.url }, legacy: { idempotency: {} } } } })
    )
    await leaveOnceCalled(gw, upstream, { ...ALICE, 'idempotency-key': 'left-then-timeout', 'x-request-id': 'left-keyed-1' })
    const { line, server } = await endOf(gw, 'left-keyed-1')
    expect(line).toMatchObject({ status: 499, error: 'UPSTREAM_TIMEOUT' })
    expect(server.attributes).not.toHaveProperty('http.response.status_code')
    expect(server.attributes).toMatchObject({ 'error.type': 'UPSTREAM_TIMEOUT', 'v4gw.idempotency.outcome': 'executed' })
    expect(server.statusCode).toBe(2)
  })
})

describe('tracing on, a reload of the tracing keys (SPEC 8, 17)', () => {
  const { upstream } = v4Upstream()
  const receiver = useOtlpReceiver()
  const dir = useTempDir('v4gw-tracing-keys-')

  it('applies sampleRatio, trustIncoming and forwardBaggage from the next request, and says the restart-only keys need a restart', async () => {
    const path = join(dir.path, 'gateway.yaml')
    const before = { sampleRatio: 1, trustIncoming: false, forwardBaggage: false }
    await writeFile(path, stringify(tracedConfig(upstream.url, receiver, before)))
    const gw = await startGateway(tracedConfig(upstream.url, receiver, before), { configPath: path })
    const clientHeaders = { ...ALICE, traceparent: `00-${CLIENT_TRACE_ID}-${CLIENT_PARENT_ID}-01`, baggage: 'tier=gold' }

    const { made: untrusted } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: clientHeaders, json: { input: 1 } }))
    expect(parsedTraceparent(untrusted[0]).traceId).not.toBe(CLIENT_TRACE_ID)
    expect(untrusted[0]?.headers).not.toHaveProperty('baggage')

    const after = { sampleRatio: 0, trustIncoming: true, forwardBaggage: true, endpoint: 'http://127.0.0.1:9/v1/traces', headers: { 'x-collector-tenant': 'other' } }
    await writeFile(path, stringify(tracedConfig(upstream.url, receiver, after)))
    const reload = await send(gw.adminUrl, '/admin/reload', { method: 'POST' })
    expect(reload.status).toBe(200)
    expect(reload.json.restartRequired).toEqual(expect.arrayContaining(['tracing.endpoint', 'tracing.headers']))
    expect(reload.json.restartRequired).not.toContain('tracing.sampleRatio')

    // Trusted now: the client's trace and sampled flag, its baggage forwarded; exported to the endpoint the gateway started with.
    const { made: trusted } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: clientHeaders, json: { input: 1 } }))
    const sent = parsedTraceparent(trusted[0])
    expect(sent).toMatchObject({ traceId: CLIENT_TRACE_ID, flags: '01' })
    expect(trusted[0]?.headers.baggage).toBe('tier=gold')
    const server = (await traceOf(receiver, CLIENT_TRACE_ID)).find((span) => span.kind === 'SERVER')
    expect(server?.parentSpanId).toBe(CLIENT_PARENT_ID)

    // A new root is sampled by the new ratio: none.
    const { made: unsampled, line } = await run(gw, upstream, () => send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } }))
    expect(parsedTraceparent(unsampled[0]).flags).toBe('00')
    expect(line.traceId).toBe(parsedTraceparent(unsampled[0]).traceId)
  })
})

describe('tracing on, a reload while a request runs', () => {
  const dir = useTempDir('v4gw-tracing-reload-')

  it('keeps the query credential of the config the request started with out of url.query, whatever a reload changes meanwhile (SPEC 5, 8, 17)', async () => {
    const token = 'tok-reload-secret-7c1'
    const upstream = await startFaultUpstream(() => {})
    const receiver = await startOtlpReceiver()
    const path = join(dir.path, 'gateway.yaml')
    const config = (queryParam: string | null) => tracedConfig(upstream.url, receiver, {}, { credentials: { queryParam } })
    await writeFile(path, stringify(config('access_token')))
    const gw = await startGateway(config('access_token'), { configPath: path })
    const answer = send(gw.url, `/v1/headless/runs?access_token=${token}&page=2`, { json: { input: 1 } })
    const held = await upstream.nextExchange()
    // The request read its credential from the query; the reload now names no query credential.
    await writeFile(path, stringify(config(null)))
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST' })).status).toBe(200)
    answerJson(held, 200, { output: 'done' })
    expect((await answer).status).toBe(200)
    await until(() => receiver.spans.some((span) => span.kind === 'SERVER'))
    expect(receiver.spans.find((span) => span.kind === 'SERVER')?.attributes['url.query']).toBe('page=2')
    for (const body of receiver.bodies) expect(body.includes(token)).toBe(false)
  })
})
