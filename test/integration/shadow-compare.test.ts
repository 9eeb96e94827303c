import { hash } from 'node:crypto'
import { createServer, type ServerResponse } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { gzipSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { rawExchange } from '../helpers/raw-http.js'
import { startRecordingUpstream, type RecordedRequest, type RecordingUpstream } from '../helpers/recording-upstream.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { until } from '../helpers/until.js'
import { configSchema, LEGACY_V1_ROUTES } from '../../src/config/schema.js'

const TOKEN = 'sess_shadow_secret_token_1'
const EXECUTE = 'POST /v1/headless/runs'
const INVOKE = 'POST /v1/runs/invoke'
const LEGACY_ANSWER = { output: { text: 'done', plan: 'gold' }, effective: { policy: 'p', route: 'r', risk: 'low' }, meta: { requestId: 'legacy-id', timingMs: { total: 3 } } }

function json(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(JSON.stringify(body))
}

/** A V4 side that holds each answer until released (or 3 s), so a test can see the client answered first. */
function heldV4(answer: (request: RecordedRequest) => unknown = () => LEGACY_ANSWER) {
  let holding = 0
  let release: () => void = () => undefined
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  return {
    handler(request: RecordedRequest, response: ServerResponse) {
      holding++
      const timer = setTimeout(() => release(), 3_000)
      void released.then(() => {
        clearTimeout(timer)
        holding--
        json(response, 200, answer(request))
      })
    },
    holding: () => holding,
    release: () => release()
  }
}

function shadowConfig(v4: RecordingUpstream, legacy: RecordingUpstream, shadow: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return testConfig(v4.url, {
    tenants: { acme: { upstream: { staging: v4.url, legacy: legacy.url }, migration: { stage: 'shadow', shadow } } },
    ...extra
  })
}

async function shadowOf(gw: StartedGateway, route = EXECUTE): Promise<Record<string, any>> { // eslint-disable-line @typescript-eslint/no-explicit-any -- the answer's shape is what is asserted
  return (await send(gw.adminUrl, '/admin/shadow?tenant=acme')).json.tenants.acme[route]
}

/** SPEC 15's sampling, written out from the SPEC: the first 8 bytes of SHA-256("shadow\0" + tenant + "\0" + key), mod 10000, below percent × 100. */
function sampledBySpec(tenant: string, key: string, percent: number): boolean {
  return Number(BigInt(`0x${hash('sha256', `shadow\u0000${tenant}\u0000${key}`, 'hex').slice(0, 16)}`) % 10_000n) < percent * 100
}

/** SPEC 12's client id of a bearer credential: `fp:` and 16 hex digits of its SHA-256. */
function clientIdOf(token: string): string {
  return `fp:${hash('sha256', token, 'hex').slice(0, 16)}`
}

function execute(gw: StartedGateway, headers: Record<string, string> = {}, body: unknown = { input: { q: 1 } }) {
  return send(gw.url, '/v1/headless/runs', { headers: { authorization: `Bearer ${TOKEN}`, ...headers }, json: body })
}

describe('SPEC 15 shadow compare against real loopback upstreams', () => {
  it('answers the client from the legacy upstream while a V4 side that takes 3 s still holds the comparison', async () => {
    const v4Side = heldV4()
    const v4 = await startRecordingUpstream(v4Side.handler)
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    try {
      const answer = await execute(gw)
      // The client has the legacy answer, as it came, while V4 has not answered yet.
      expect(answer.status).toBe(200)
      expect(answer.json).toEqual(LEGACY_ANSWER)
      expect(answer.headers['x-v4gw-served-by']).toBe('legacy')
      await until(() => v4Side.holding() === 1)
      expect(legacy.requests).toHaveLength(1)
      expect(v4.requests[0]?.headers['x-v4gw-shadow']).toBe('1')
      expect(v4.requests[0]?.url).toBe('/v4/execute')
      expect(v4.requests[0]?.headers.authorization).toBe(`Bearer ${TOKEN}`)
      expect((await shadowOf(gw)).comparisons).toBe(0)
    } finally {
      v4Side.release()
    }
    await until(async () => (await shadowOf(gw)).matches === 1)
  })

  it('records a mismatch by its pointers, hashed where a key could hold data, never a value', async () => {
    const v4 = await startRecordingUpstream((_request, response) => json(response, 200, { ...LEGACY_ANSWER, output: { text: 'done', 'alice@example.com': 'silver' }, meta: { requestId: 'v4-id' } }))
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, { ...LEGACY_ANSWER, output: { text: 'done', 'alice@example.com': 'gold' } }))
    const gw = await startGateway(shadowConfig(v4, legacy))
    await execute(gw, { 'x-request-id': 'shadow-mismatch-1' })
    await until(async () => (await shadowOf(gw)).mismatches === 1)
    const route = await shadowOf(gw)
    expect(route.topPointers).toEqual([{ pointer: expect.stringMatching(/^\/output\/~h[0-9a-f]{8}$/), count: 1 }])
    expect(route.samples).toEqual([{ requestId: 'shadow-mismatch-1', at: expect.any(String), primaryStatus: 200, candidateStatus: 200, pointers: [route.topPointers[0].pointer] }])
    const everything = `${(await send(gw.adminUrl, '/admin/shadow')).text}${(await send(gw.adminUrl, '/metrics')).text}${gw.logs.text()}`
    for (const secret of ['alice@example.com', 'gold', 'silver', TOKEN]) expect(everything).not.toContain(secret)
    expect((await send(gw.adminUrl, '/metrics')).text).toContain(`v4gw_shadow_comparisons_total{tenant="acme",route="${EXECUTE}",outcome="mismatch"} 1`)
  })

  it('hashes a member name that is a credential, a service key or the token this request sent, though its characters are plain', async () => {
    const usage = (left: number) => ({ ...LEGACY_ANSWER, usage: { key_live_4f1c9a: { left }, [TOKEN]: { left } } })
    const v4 = await startRecordingUpstream((_request, response) => json(response, 200, { ...usage(2), meta: { requestId: 'v4-id' } }))
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, usage(3)))
    const gw = await startGateway(shadowConfig(v4, legacy))
    await execute(gw, { 'x-request-id': 'shadow-key-name-1' })
    await until(async () => (await shadowOf(gw)).mismatches === 1)
    const pointers = (await shadowOf(gw)).topPointers.map((entry: { pointer: string }) => entry.pointer).sort()
    expect(pointers).toEqual([expect.stringMatching(/^\/usage\/~h[0-9a-f]{8}\/left$/), expect.stringMatching(/^\/usage\/~h[0-9a-f]{8}\/left$/)])
    const everything = `${(await send(gw.adminUrl, '/admin/shadow')).text}${(await send(gw.adminUrl, '/metrics')).text}${gw.logs.text()}`
    for (const secret of ['key_live_4f1c9a', TOKEN]) expect(everything).not.toContain(secret)
  })

  it('hashes a member name that is a token the request sent in a header credentials.sources does not read (the legacy upstream got it as sent)', async () => {
    const second = 'second-token-not-a-source-0123'
    const usage = (left: number) => ({ ...LEGACY_ANSWER, usage: { [second]: { left } } })
    const v4 = await startRecordingUpstream((_request, response) => json(response, 200, { ...usage(2), meta: { requestId: 'v4-id' } }))
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, usage(3)))
    const gw = await startGateway(shadowConfig(v4, legacy, {}, { credentials: { sources: ['authorization'] } }))
    await execute(gw, { 'x-session-token': second, 'x-request-id': 'shadow-second-token-1' })
    await until(async () => (await shadowOf(gw)).mismatches === 1)
    expect(legacy.requests[0]?.headers['x-session-token']).toBe(second)
    expect((await shadowOf(gw)).topPointers).toEqual([{ pointer: expect.stringMatching(/^\/usage\/~h[0-9a-f]{8}\/left$/), count: 1 }])
    const everything = `${(await send(gw.adminUrl, '/admin/shadow')).text}${(await send(gw.adminUrl, '/metrics')).text}${gw.logs.text()}`
    expect(everything).not.toContain(second)
  })

  it("compares the gateway's own refusal as translate would give it: a key_* credential is a 401 candidate with no V4 call", async () => {
    const v4 = await startRecordingUpstream()
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { 'x-api-key': 'key_live_admin' }, json: { input: 1 } })
    expect(answer.status).toBe(200)
    await until(async () => (await shadowOf(gw)).mismatches === 1)
    expect((await shadowOf(gw)).samples[0]).toMatchObject({ primaryStatus: 200, candidateStatus: 401, pointers: expect.arrayContaining(['#status', '/error', '/output']) })
    expect(v4.requests).toHaveLength(0)
  })

  it('counts a V4 side that resets the connection as candidate_error, the client served all the same', async () => {
    const v4 = await startRecordingUpstream((_request, _response, raw) => {
      raw.socket.destroy()
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    expect((await execute(gw)).status).toBe(200)
    await until(async () => (await shadowOf(gw)).candidateErrors === 1)
    expect(await shadowOf(gw)).toMatchObject({ comparisons: 1, matches: 0, mismatches: 0, mismatchRate: null })
    // SPEC 17: the V4 side's failure is an upstream failure labelled shadow.
    expect((await send(gw.adminUrl, '/metrics')).text).toContain('v4gw_upstream_failures_total{tenant="acme",upstream="shadow",cause="reset"} 1')
  })

  it('counts the failed V4 call of a comparison whose route a reload removed meanwhile, though the comparison itself is discarded', async () => {
    let reset: () => void = () => undefined
    const resetNow = new Promise<void>((resolve) => {
      reset = resolve
    })
    let held = 0
    const v4 = await startRecordingUpstream((_request, _response, raw) => {
      held++
      void resetNow.then(() => raw.socket.destroy())
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    expect((await execute(gw)).status).toBe(200)
    await until(() => held === 1)
    const withoutExecute = shadowConfig(v4, legacy)
    ;(withoutExecute.tenants as Record<string, Record<string, unknown>>).acme!.legacy = { routes: LEGACY_V1_ROUTES.filter((route) => `${route.method} ${route.path}` !== EXECUTE) }
    await gw.gateway.applyConfig(configSchema.parse(withoutExecute))
    reset()
    // SPEC 17: the call was made and failed; the comparison is the reload's to discard, the failure is not.
    await until(async () => (await send(gw.adminUrl, '/metrics')).text.includes('v4gw_upstream_failures_total{tenant="acme",upstream="shadow",cause="reset"} 1'))
    expect((await send(gw.adminUrl, '/metrics')).text).not.toContain(`v4gw_shadow_comparisons_total{tenant="acme",route="${EXECUTE}"`)
    // Nothing was counted for the route while it was gone: it shows none once a reload brings it back.
    await gw.gateway.applyConfig(configSchema.parse(shadowConfig(v4, legacy)))
    expect(await shadowOf(gw)).toMatchObject({ comparisons: 0, candidateErrors: 0 })
  })

  it('counts a V4 sessions.start that several comparisons waited for as one upstream failure', async () => {
    // Cut once the three clients have their answers (each comparison starts as its answer ends)
    // and a moment after, for the last comparison to join it, however loaded the machine.
    let answered: () => void = () => undefined
    const allAnswered = new Promise<void>((resolve) => {
      answered = resolve
    })
    const v4 = await startRecordingUpstream((_request, _response, raw) => {
      void allAnswered.then(() => setTimeout(() => raw.socket.destroy(), 50))
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    const invoke = () => send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: 1, stateId: 'shared-shadow-start' } })
    expect((await Promise.all([invoke(), invoke(), invoke()])).map((answer) => answer.status)).toEqual([200, 200, 200])
    answered()
    await until(async () => (await shadowOf(gw, INVOKE))?.candidateErrors === 3)
    expect(v4.requests.filter((request) => request.url === '/v4/sessions.start')).toHaveLength(1)
    expect((await send(gw.adminUrl, '/metrics')).text).toContain('v4gw_upstream_failures_total{tenant="acme",upstream="shadow",cause="reset"} 1')
  })

  it('counts a legacy side that does not answer as primary_error, and makes no V4 call', async () => {
    const v4 = await startRecordingUpstream()
    const legacy = await startRecordingUpstream((_request, _response, raw) => {
      raw.socket.destroy()
    })
    const gw = await startGateway(shadowConfig(v4, legacy))
    expect((await execute(gw)).status).toBe(502)
    await until(async () => (await shadowOf(gw)).primaryErrors === 1)
    expect(v4.requests).toHaveLength(0)
  })

  it('counts a legacy side that fails before the body has come in whole as primary_error too, not skipped', async () => {
    const v4 = await startRecordingUpstream()
    // Reset at the head: the gateway's 502 goes out while the client is still sending.
    const legacyServer = createServer((request) => request.socket.destroy())
    await new Promise<void>((resolve) => legacyServer.listen(0, '127.0.0.1', resolve))
    const legacy = { url: `http://127.0.0.1:${(legacyServer.address() as AddressInfo).port}` } as RecordingUpstream
    try {
      const gw = await startGateway(shadowConfig(v4, legacy))
      const body = Buffer.from(JSON.stringify({ input: 'x'.repeat(300_000) }))
      const { port } = new URL(gw.url)
      const socket = connect(Number(port), '127.0.0.1')
      socket.on('error', () => undefined)
      const received: Buffer[] = []
      socket.on('data', (chunk: Buffer) => received.push(chunk))
      socket.write(`POST /v1/headless/runs HTTP/1.1\r\nhost: gw\r\nauthorization: Bearer ${TOKEN}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`)
      socket.write(body.subarray(0, 64 * 1024))
      await until(() => Buffer.concat(received).includes('\r\n\r\n'))
      expect(Buffer.concat(received).toString('latin1')).toMatch(/^HTTP\/1\.1 502 /)
      socket.end(body.subarray(64 * 1024))
      await until(async () => (await shadowOf(gw))?.primaryErrors === 1)
      expect(await shadowOf(gw)).toMatchObject({ skipped: 0 })
      expect(v4.requests).toHaveLength(0)
      socket.destroy()
    } finally {
      await new Promise((resolve) => legacyServer.close(resolve))
    }
  })

  it.each([
    { cap: "the tenant's maxInFlight", shadow: { maxInFlight: 1 }, extra: {} },
    { cap: "limits.shadowInFlight, the replica's over all tenants, though maxInFlight has room", shadow: { maxInFlight: 100 }, extra: { limits: { shadowInFlight: 1 } } }
  ])('drops a comparison past $cap instead of queueing it, and still serves its client', async ({ shadow, extra }) => {
    const v4Side = heldV4()
    const v4 = await startRecordingUpstream(v4Side.handler)
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy, shadow, extra))
    try {
      expect((await execute(gw)).status).toBe(200)
      await until(() => v4Side.holding() === 1)
      expect((await execute(gw)).status).toBe(200)
      expect(await shadowOf(gw)).toMatchObject({ dropped: 1 })
      expect(v4.requests).toHaveLength(1)
    } finally {
      v4Side.release()
    }
    await until(async () => (await shadowOf(gw)).matches === 1)
  })

  it('holds no comparison slot for a session-execute request on a route sampled at 0 %: another route\'s comparison is not dropped', async () => {
    const v4 = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(
      testConfig(v4.url, {
        tenants: {
          acme: { upstream: { staging: v4.url, legacy: legacy.url }, migration: { stage: 'shadow', shadow: { maxInFlight: 1 }, routes: { [INVOKE]: { shadow: { percent: 0 } } } } }
        }
      })
    )
    // A session-execute request whose body has not all come: in flight until its socket goes.
    const { hostname, port } = new URL(gw.url)
    const held = connect({ host: hostname, port: Number(port) })
    held.on('error', () => undefined)
    held.write(`POST /v1/runs/invoke HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{"input":\r\n`)
    try {
      await until(async () => /^v4gw_requests_in_flight 1$/m.test((await send(gw.adminUrl, '/metrics')).text))
      expect((await execute(gw)).status).toBe(200)
      await until(async () => (await shadowOf(gw)).matches === 1)
      expect(await shadowOf(gw)).toMatchObject({ dropped: 0 })
    } finally {
      held.destroy()
    }
  })

  it('samples execute by request id as SPEC 15 writes it: the requests compared are exactly those whose bucket is below percent × 100', async () => {
    const v4 = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy, { percent: 37.5 }))
    const ids = Array.from({ length: 24 }, (_unused, index) => `sampling-${index}`)
    for (const id of ids) expect((await execute(gw, { 'x-request-id': id })).status).toBe(200)
    const expected = ids.filter((id) => sampledBySpec('acme', id, 37.5))
    expect(expected.length).toBeGreaterThan(0)
    expect(expected.length).toBeLessThan(ids.length)
    await until(async () => (await shadowOf(gw)).matches === expected.length)
    expect(v4.requests.map((request) => request.headers['x-request-id']).sort()).toEqual([...expected].sort())
  })

  it('samples session-execute by client id and state as SPEC 15 writes it: two clients with the same states are sampled apart', async () => {
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: 'ses_1', defaults: {}, meta: {} })
      else json(response, 200, LEGACY_ANSWER)
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy, { percent: 50 }))
    const tokens = ['sess_shadow_client_a_1', 'sess_shadow_client_b_1']
    const states = Array.from({ length: 10 }, (_unused, index) => `state-${index}`)
    const expected: string[] = []
    for (const [client, token] of tokens.entries()) {
      for (const stateId of states) {
        const id = `${stateId}-client-${client}`
        await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${token}`, 'x-request-id': id }, json: { input: 1, stateId } })
        if (sampledBySpec('acme', `${clientIdOf(token)}\u0000${stateId}`, 50)) expected.push(id)
      }
    }
    // The two clients' samples differ: a key without the client id would sample both alike.
    const perClient = (client: number): string[] => expected.filter((id) => id.endsWith(`-client-${client}`)).map((id) => id.replace(/-client-\d$/, ''))
    expect(perClient(0)).not.toEqual(perClient(1))
    await until(async () => (await shadowOf(gw, INVOKE)).matches === expected.length)
    const executed = v4.requests.filter((request) => request.url !== '/v4/sessions.start').map((request) => request.headers['x-request-id'])
    expect(executed.sort()).toEqual([...expected].sort())
  })

  it('discards a comparison whose route a reload removed while it ran: no count, no metric series brought back', async () => {
    const v4Side = heldV4()
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: 'ses_1', defaults: {}, meta: {} })
      else if (request.url === '/v4/execute') v4Side.handler(request, response)
      else json(response, 200, LEGACY_ANSWER)
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    try {
      expect((await execute(gw)).status).toBe(200)
      await until(() => v4Side.holding() === 1)
      // The execute route goes; the session-execute route stays.
      const withoutExecute = shadowConfig(v4, legacy)
      ;(withoutExecute.tenants as Record<string, Record<string, unknown>>).acme!.legacy = { routes: LEGACY_V1_ROUTES.filter((route) => `${route.method} ${route.path}` !== EXECUTE) }
      await gw.gateway.applyConfig(configSchema.parse(withoutExecute))
    } finally {
      v4Side.release()
    }
    await until(() => v4Side.holding() === 0)
    // A comparison on the route that stayed, made after the discarded one's V4 answer came in, ends after it.
    await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: 1, stateId: 'after-reload' } })
    await until(async () => (await shadowOf(gw, INVOKE))?.matches === 1)
    expect((await send(gw.adminUrl, '/metrics')).text).not.toContain(`v4gw_shadow_comparisons_total{tenant="acme",route="${EXECUTE}"`)
    // Nothing was counted for the route while it was gone: it shows none once a reload brings it back.
    await gw.gateway.applyConfig(configSchema.parse(shadowConfig(v4, legacy)))
    expect(await shadowOf(gw)).toMatchObject({ comparisons: 0, matches: 0 })
  })

  it('at 100 %, counts a session-execute request past maxInFlight as dropped and one over maxBodyBytes as skipped (every state is sampled)', async () => {
    const v4Side = heldV4()
    const v4 = await startRecordingUpstream(v4Side.handler)
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy, { maxInFlight: 1, maxBodyBytes: 256 }))
    const invoke = (body: unknown) => send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: body })
    try {
      expect((await invoke({ input: 1, stateId: 'st-1' })).status).toBe(200)
      await until(() => v4Side.holding() === 1)
      expect((await invoke({ input: 2, stateId: 'st-2' })).status).toBe(200)
      await until(async () => (await shadowOf(gw, INVOKE)).dropped === 1)
    } finally {
      v4Side.release()
    }
    await until(async () => (await shadowOf(gw, INVOKE)).comparisons === 1)
    expect((await invoke({ input: 'x'.repeat(300), stateId: 'st-3' })).status).toBe(200)
    await until(async () => (await shadowOf(gw, INVOKE)).skipped === 1)
  })

  it('at 100 %, counts as skipped a session-execute request whose chunked body passes maxBodyBytes, and one answered before its body came in whole', async () => {
    const v4 = await startRecordingUpstream()
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy, { maxBodyBytes: 256 }))
    const body = JSON.stringify({ input: 'x'.repeat(300), stateId: 'st-chunked' })
    const chunked = `POST /v1/runs/invoke HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`
    expect((await rawExchange(gw.url, chunked, { timeoutMs: 3_000, stopAfterResponse: true })).response?.status).toBe(200)
    await until(async () => (await shadowOf(gw, INVOKE))?.skipped === 1)
    // The legacy side answers from the head, before the body has come.
    const early = createServer((_request, response) => json(response, 401, { error: 'unauthorized' }))
    await new Promise<void>((resolve) => early.listen(0, '127.0.0.1', resolve))
    try {
      const earlyUrl = `http://127.0.0.1:${(early.address() as AddressInfo).port}`
      const other = await startGateway(testConfig(v4.url, { tenants: { acme: { upstream: { staging: v4.url, legacy: earlyUrl }, migration: { stage: 'shadow' } } } }))
      const partial = `POST /v1/runs/invoke HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{"input":\r\n`
      expect((await rawExchange(other.url, partial, { timeoutMs: 3_000, stopAfterResponse: true })).response?.status).toBe(401)
      await until(async () => (await shadowOf(other, INVOKE))?.skipped === 1)
      expect(await shadowOf(other, INVOKE)).toMatchObject({ comparisons: 0 })
    } finally {
      early.closeAllConnections()
      await new Promise<void>((resolve) => early.close(() => resolve()))
    }
    expect(v4.requests).toHaveLength(0)
  })

  it('compares a session-execute request without a body: translate’s 415 against the legacy answer', async () => {
    const v4 = await startRecordingUpstream()
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    expect((await send(gw.url, '/v1/runs/invoke', { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200)
    await until(async () => (await shadowOf(gw, INVOKE)).comparisons === 1)
    expect(await shadowOf(gw, INVOKE)).toMatchObject({ mismatches: 1 })
    expect(v4.requests).toHaveLength(0)
  })

  it('skips an execute request answered before its body came in whole: translate would have read it all', async () => {
    const v4 = await startRecordingUpstream()
    // The legacy side answers from the head, before the body has come.
    const legacy = createServer((_request, response) => json(response, 401, { error: 'unauthorized' }))
    await new Promise<void>((resolve) => legacy.listen(0, '127.0.0.1', resolve))
    try {
      const legacyUrl = `http://127.0.0.1:${(legacy.address() as AddressInfo).port}`
      const gw = await startGateway(testConfig(v4.url, { tenants: { acme: { upstream: { staging: v4.url, legacy: legacyUrl }, migration: { stage: 'shadow' } } } }))
      const request = `POST /v1/headless/runs HTTP/1.1\r\nHost: gateway.test\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{"input":\r\n`
      const answer = await rawExchange(gw.url, request, { timeoutMs: 3_000, stopAfterResponse: true })
      expect(answer.response?.status).toBe(401)
      await until(async () => (await shadowOf(gw)).skipped === 1)
      expect(await shadowOf(gw)).toMatchObject({ comparisons: 0 })
      expect(v4.requests).toHaveLength(0)
    } finally {
      legacy.closeAllConnections()
      await new Promise<void>((resolve) => legacy.close(() => resolve()))
    }
  })

  it('skips a request larger than maxBodyBytes, and one whose shadow upstream may not get the credential', async () => {
    const v4 = await startRecordingUpstream()
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const small = await startGateway(shadowConfig(v4, legacy, { maxBodyBytes: 64 }))
    await execute(small, {}, { input: 'x'.repeat(100) })
    await until(async () => (await shadowOf(small)).skipped === 1)
    const production = await startRecordingUpstream()
    const other = await startGateway(
      testConfig(v4.url, {
        tenants: { acme: { upstream: { staging: v4.url, production: production.url, legacy: legacy.url }, migration: { stage: 'shadow', shadow: { upstream: 'production', allowProductionSideEffects: true } } } }
      })
    )
    await execute(other)
    await until(async () => (await shadowOf(other)).skipped === 1)
    expect(v4.requests).toHaveLength(0)
    expect(production.requests).toHaveLength(0)
  })

  it('compares a legacy answer compressed for a client that accepts gzip by its content', async () => {
    const v4 = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const legacy = await startRecordingUpstream((request, response) => {
      // A legacy backend that compresses when the client asks: the legacy side streams the client's Accept-Encoding.
      const compress = String(request.headers['accept-encoding'] ?? '').includes('gzip')
      const body = Buffer.from(JSON.stringify(LEGACY_ANSWER))
      response.writeHead(200, { 'content-type': 'application/json', ...(compress ? { 'content-encoding': 'gzip' } : {}) })
      response.end(compress ? gzipSync(body) : body)
    })
    const gw = await startGateway(shadowConfig(v4, legacy))
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { authorization: `Bearer ${TOKEN}`, 'accept-encoding': 'gzip' }, json: { input: { q: 1 } } })
    expect(answer.headers['content-encoding']).toBe('gzip')
    await until(async () => (await shadowOf(gw)).comparisons === 1)
    expect(await shadowOf(gw)).toMatchObject({ matches: 1, mismatches: 0 })
  })

  it('skips a comparison whose V4 answer is larger than maxBodyBytes, reading no more of it than that', async () => {
    // An answer that never ends: read whole, it would hold the comparison until timeoutMs (a candidate_error).
    const v4 = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' })
      const timer = setInterval(() => response.write(Buffer.alloc(65_536, 0x20)), 50)
      response.on('close', () => clearInterval(timer))
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, { ok: 1 }))
    const gw = await startGateway(shadowConfig(v4, legacy, { maxBodyBytes: 64 }))
    expect((await execute(gw)).json).toEqual({ ok: 1 })
    await until(async () => (await shadowOf(gw)).skipped === 1)
    expect(await shadowOf(gw)).toMatchObject({ comparisons: 0, candidateErrors: 0 })
    // Not a failure of the shadow upstream either.
    expect((await send(gw.adminUrl, '/metrics')).text).not.toContain('upstream="shadow"')
  })

  it('compares the 502 translate would answer when sessions.start answers without a usable session id, and counts no candidate_error', async () => {
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') json(response, 201, { session: { sid: 'ses_1' }, meta: {} })
      else json(response, 200, LEGACY_ANSWER)
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: 1, stateId: 'no-id' } })
    await until(async () => (await shadowOf(gw, INVOKE)).comparisons === 1)
    expect(await shadowOf(gw, INVOKE)).toMatchObject({ mismatches: 1, candidateErrors: 0 })
    expect(v4.requests.map((request) => request.url)).toEqual(['/v4/sessions.start'])
  })

  it('compares the 502 translate would answer when sessions.start answers with a body that is not JSON, and counts no candidate_error', async () => {
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') response.writeHead(200, { 'content-type': 'text/html' }).end('OK')
      else json(response, 200, LEGACY_ANSWER)
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: 1, stateId: 'not-json' } })
    await until(async () => (await shadowOf(gw, INVOKE)).comparisons === 1)
    expect(await shadowOf(gw, INVOKE)).toMatchObject({ mismatches: 1, candidateErrors: 0 })
  })

  it('counts a shared V4 sessions.start that timed out once, though the timer of a comparison waiting on it fired first', async () => {
    const v4Side = heldV4()
    const v4 = await startRecordingUpstream(v4Side.handler)
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    // Two session-execute routes on one state share its session (SPEC 4 step 3), each with its own timeoutMs (SPEC 15).
    const routes = [...LEGACY_V1_ROUTES, { method: 'POST', path: '/v1/runs/quick', action: 'session-execute', stateKey: 'body:/stateId' }]
    const gw = await startGateway(
      testConfig(v4.url, {
        tenants: {
          acme: {
            upstream: { staging: v4.url, legacy: legacy.url },
            legacy: { routes },
            // The slow route's 2 s leave the quick route's request time to join its start on a loaded machine.
            migration: { stage: 'shadow', shadow: { timeoutMs: 2_000 }, routes: { 'POST /v1/runs/quick': { shadow: { timeoutMs: 100 } } } }
          }
        }
      })
    )
    try {
      const invoke = (path: string) => send(gw.url, path, { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: 1, stateId: 'timed-shared-start' } })
      // The slow route's comparison sends the start; the quick route's joins it, and its 100 ms timer fires while it waits.
      expect((await invoke('/v1/runs/invoke')).status).toBe(200)
      await until(() => v4Side.holding() === 1)
      expect((await invoke('/v1/runs/quick')).status).toBe(200)
      await until(async () => (await shadowOf(gw, INVOKE))?.candidateErrors === 1 && (await shadowOf(gw, 'POST /v1/runs/quick'))?.candidateErrors === 1)
      expect(v4.requests.filter((request) => request.url === '/v4/sessions.start')).toHaveLength(1)
      expect((await send(gw.adminUrl, '/metrics')).text).toContain('v4gw_upstream_failures_total{tenant="acme",upstream="shadow",cause="timeout"} 1')
    } finally {
      v4Side.release()
    }
  })

  it('gives up on a V4 side slower than timeoutMs: candidate_error', async () => {
    const v4Side = heldV4()
    const v4 = await startRecordingUpstream(v4Side.handler)
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy, { timeoutMs: 100 }))
    try {
      await execute(gw)
      await until(async () => (await shadowOf(gw)).candidateErrors === 1)
      expect((await send(gw.adminUrl, '/metrics')).text).toContain('v4gw_upstream_failures_total{tenant="acme",upstream="shadow",cause="timeout"} 1')
    } finally {
      v4Side.release()
    }
  })

  it('leaves out ignored pointers and the always-ignored meta members', async () => {
    const v4 = await startRecordingUpstream((_request, response) => json(response, 200, { ...LEGACY_ANSWER, output: { text: 'done', plan: 'gold', generatedAt: 2 }, meta: { requestId: 'other', timingMs: { total: 99 }, executionId: 'e2' } }))
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, { ...LEGACY_ANSWER, output: { text: 'done', plan: 'gold', generatedAt: 1 }, meta: { requestId: 'legacy', timingMs: { total: 1 }, executionId: 'e1' } }))
    const gw = await startGateway(shadowConfig(v4, legacy, { ignore: ['/output/generatedAt'] }))
    await execute(gw)
    await until(async () => (await shadowOf(gw)).matches === 1)
  })

  it('runs shadow session-execute in session-map entries of its own, not counted by /admin/sessions', async () => {
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: 'ses_shadow_1', defaults: {}, meta: {} })
      else json(response, 200, { ...LEGACY_ANSWER, meta: { requestId: 'x', sessionId: 'ses_shadow_1' } })
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, { ...LEGACY_ANSWER, meta: { requestId: 'y', sessionId: 'legacy-state' } }))
    const gw = await startGateway(shadowConfig(v4, legacy))
    for (let call = 1; call <= 2; call++) {
      await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: call, stateId: 'state-1' } })
      await until(async () => (await shadowOf(gw, INVOKE)).matches === call)
    }
    // One start for the state, then the mapped session: every call carried the shadow header.
    expect(v4.requests.map((request) => request.url)).toEqual(['/v4/sessions.start', '/v4/sessions/ses_shadow_1/executions.execute', '/v4/sessions/ses_shadow_1/executions.execute'])
    expect(v4.requests.every((request) => request.headers['x-v4gw-shadow'] === '1')).toBe(true)
    expect((await send(gw.adminUrl, '/admin/sessions')).json.total).toBe(0)
  })

  it("bounds shadow session-execute's own map by maxSessions, and drops it when the shadow upstream's origin changes", async () => {
    let started = 0
    const v4Handler = (request: RecordedRequest, response: ServerResponse): void => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: `ses_${++started}`, defaults: {}, meta: {} })
      else json(response, 200, LEGACY_ANSWER)
    }
    const v4 = await startRecordingUpstream(v4Handler)
    const otherV4 = await startRecordingUpstream(v4Handler)
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy, { maxSessions: 2 }))
    let compared = 0
    const invoke = async (stateId: string): Promise<void> => {
      await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: 1, stateId } })
      compared++
      await until(async () => (await shadowOf(gw, INVOKE)).matches === compared)
    }
    const starts = (upstream: RecordingUpstream): number => upstream.requests.filter((request) => request.url === '/v4/sessions.start').length
    await invoke('a')
    await invoke('b')
    await invoke('a')
    expect(starts(v4)).toBe(2)
    // A third state pushes out the least recently used one (b): b starts a session again, a does not.
    await invoke('c')
    await invoke('a')
    expect(starts(v4)).toBe(3)
    await invoke('b')
    expect(starts(v4)).toBe(4)

    // Another shadow upstream (production, allowed): its own sessions; back on the first, the old entries are gone.
    const toOther = shadowConfig(v4, legacy, { maxSessions: 2, upstream: 'production', allowProductionSideEffects: true, forwardCredentials: true })
    const acme = (toOther.tenants as Record<string, { upstream: Record<string, string> }>).acme as { upstream: Record<string, string> }
    acme.upstream.production = otherV4.url
    await gw.gateway.applyConfig(configSchema.parse(toOther))
    await invoke('b')
    expect(starts(otherV4)).toBe(1)
    await gw.gateway.applyConfig(configSchema.parse(shadowConfig(v4, legacy, { maxSessions: 2 })))
    await invoke('b')
    expect(starts(v4)).toBe(5)
  })

  it('keeps its shadow sessions across a reload that changes only sessions.ttlMs, a restart-only key', async () => {
    let started = 0
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: `ses_${++started}`, defaults: {}, meta: {} })
      else json(response, 200, LEGACY_ANSWER)
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    let compared = 0
    const invoke = async (): Promise<void> => {
      await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: 1, stateId: 'kept' } })
      compared++
      await until(async () => (await shadowOf(gw, INVOKE))?.matches === compared)
    }
    await invoke()
    await gw.gateway.applyConfig(configSchema.parse(shadowConfig(v4, legacy, {}, { sessions: { ttlMs: 60_000 } })))
    await invoke()
    expect(v4.requests.filter((request) => request.url === '/v4/sessions.start')).toHaveLength(1)
  })

  it('keeps one shadow session map per shadow upstream: routes of one tenant that name different ones do not replace each other’s', async () => {
    let started = 0
    const v4Handler = (request: RecordedRequest, response: ServerResponse): void => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: `ses_${++started}`, defaults: {}, meta: {} })
      else json(response, 200, LEGACY_ANSWER)
    }
    const staging = await startRecordingUpstream(v4Handler)
    const production = await startRecordingUpstream(v4Handler)
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const byRun = 'POST /v1/runs/:runId/invoke'
    const gw = await startGateway(
      testConfig(staging.url, {
        tenants: {
          acme: {
            upstream: { staging: staging.url, production: production.url, legacy: legacy.url },
            migration: { stage: 'shadow', shadow: {}, routes: { [byRun]: { shadow: { upstream: 'production', allowProductionSideEffects: true, forwardCredentials: true } } } }
          }
        }
      })
    )
    const starts = (upstream: RecordingUpstream): number => upstream.requests.filter((request) => request.url === '/v4/sessions.start').length
    for (let round = 1; round <= 3; round++) {
      await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: round, stateId: 'state-1' } })
      await until(async () => (await shadowOf(gw, INVOKE)).matches === round)
      await send(gw.url, '/v1/runs/run-1/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: round } })
      await until(async () => (await shadowOf(gw, byRun)).matches === round)
    }
    // Each shadow upstream started one session for its state, and served the later calls from it.
    expect([starts(staging), starts(production)]).toEqual([1, 1])
    expect(production.requests.filter((request) => request.url.endsWith('/executions.execute'))).toHaveLength(3)
  })

  it('samples session-execute per state: a state is compared on every request or on none', async () => {
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: 'ses_1', defaults: {}, meta: {} })
      else json(response, 200, LEGACY_ANSWER)
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy, { percent: 50 }))
    const states = Array.from({ length: 8 }, (_unused, index) => `state-${index}`)
    for (const round of [1, 2]) {
      for (const stateId of states) await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}`, 'x-request-id': `${stateId}-${round}` }, json: { input: round, stateId } })
    }
    await until(async () => legacy.requests.length === 16)
    // SPEC 15's sampling of each state, as the SPEC writes it: some states, not all.
    const sampled = states.filter((state) => sampledBySpec('acme', `${clientIdOf(TOKEN)}\u0000${state}`, 50))
    expect(sampled.length).toBeGreaterThan(0)
    expect(sampled.length).toBeLessThan(states.length)
    await until(async () => (await shadowOf(gw, INVOKE)).matches === 2 * sampled.length)
    // Both requests of a sampled state were compared, and no request of another.
    const executed = v4.requests.filter((request) => request.url !== '/v4/sessions.start').map((request) => request.headers['x-request-id'] as string)
    expect(executed.sort()).toEqual(sampled.flatMap((state) => [`${state}-1`, `${state}-2`]).sort())
  })

  it('lets a comparison begun before a reload use the shadow session map in effect, never replace it with one of the old bounds', async () => {
    let started = 0
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: `ses_${++started}`, defaults: {}, meta: {} })
      else json(response, 200, LEGACY_ANSWER)
    })
    // The legacy side holds the first request's answer until released: its comparison starts after the reload.
    let releaseFirst: () => void = () => undefined
    const firstHeld = new Promise<void>((resolve) => {
      releaseFirst = resolve
    })
    const legacy = await startRecordingUpstream((request, response) => {
      if (request.headers['x-request-id'] === 'before-reload') void firstHeld.then(() => json(response, 200, LEGACY_ANSWER))
      else json(response, 200, LEGACY_ANSWER)
    })
    const gw = await startGateway(shadowConfig(v4, legacy, { maxSessions: 1000 }))
    const invoke = (stateId: string, requestId: string) => send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}`, 'x-request-id': requestId }, json: { input: 1, stateId } })
    const starts = (): number => v4.requests.filter((request) => request.url === '/v4/sessions.start').length
    const before = invoke('state-old', 'before-reload')
    await until(() => legacy.requests.length === 1)
    await gw.gateway.applyConfig(configSchema.parse(shadowConfig(v4, legacy, { maxSessions: 2000 })))
    await invoke('state-new', 'after-reload-1')
    await until(async () => (await shadowOf(gw, INVOKE)).matches === 1)
    releaseFirst()
    await before
    await until(async () => (await shadowOf(gw, INVOKE)).matches === 2)
    // The state compared under the new config finds its session still mapped: the old comparison took nothing away.
    await invoke('state-new', 'after-reload-2')
    await until(async () => (await shadowOf(gw, INVOKE)).matches === 3)
    expect(starts()).toBe(2)
  })

  it('samples a session-execute request translate would refuse by its state where it shows one: a state’s refused calls are compared with its others or not at all', async () => {
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: 'ses_1', defaults: {}, meta: {} })
      else json(response, 200, LEGACY_ANSWER)
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy, { percent: 50 }))
    const byRun = 'POST /v1/runs/:runId/invoke'
    const auth = { authorization: `Bearer ${TOKEN}` }
    const runs = Array.from({ length: 8 }, (_unused, index) => index)
    for (const run of runs) {
      // The state in the path: a body translate refuses (400) still names it.
      await send(gw.url, `/v1/runs/run-${run}/invoke`, { headers: { ...auth, 'x-request-id': `param-${run}-ok` }, json: { input: 1 } })
      await send(gw.url, `/v1/runs/run-${run}/invoke`, { headers: { ...auth, 'x-request-id': `param-${run}-refused` }, json: { input: 1, policy: 42 } })
      // The state in the body: one sent as text/plain (translate's 415) still parses.
      await send(gw.url, '/v1/runs/invoke', { headers: { ...auth, 'x-request-id': `body-${run}-ok` }, json: { input: 1, stateId: `state-${run}` } })
      await send(gw.url, '/v1/runs/invoke', { headers: { ...auth, 'x-request-id': `body-${run}-refused`, 'content-type': 'text/plain' }, body: JSON.stringify({ input: 1, stateId: `state-${run}` }) })
    }
    await until(async () => legacy.requests.length === 32)
    const executed = (): string[] => v4.requests.filter((request) => request.url !== '/v4/sessions.start').map((request) => request.headers['x-request-id'] as string)
    // Every comparison has ended: each compared request that translate serves made its one V4 execution, each refused one is a mismatch.
    await until(async () => {
      const [param, body] = [await shadowOf(gw, byRun), await shadowOf(gw, INVOKE)]
      return param.matches + body.matches === executed().length && param.mismatches === param.samples.length && body.mismatches === body.samples.length
    })
    const [param, body] = [await shadowOf(gw, byRun), await shadowOf(gw, INVOKE)]
    const refusedCompared = new Set([...param.samples, ...body.samples].map((sample: { requestId: string }) => sample.requestId))
    const served = new Set(executed())
    for (const source of ['param', 'body']) {
      const compared = runs.filter((run) => served.has(`${source}-${run}-ok`))
      expect(compared.length).toBeGreaterThan(0)
      expect(compared.length).toBeLessThan(runs.length)
      expect(runs.filter((run) => refusedCompared.has(`${source}-${run}-refused`))).toEqual(compared)
    }
  })

  it('counts a session-execute request only when its state is sampled, whatever it comes to', async () => {
    const v4 = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') json(response, 201, { sessionId: 'ses_1', defaults: {}, meta: {} })
      else json(response, 200, LEGACY_ANSWER)
    })
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const production = await startRecordingUpstream()
    const invokeAll = async (gw: StartedGateway, states: string[], token = TOKEN): Promise<void> => {
      for (const stateId of states) await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${token}`, 'x-request-id': `${stateId}-${token.slice(0, 4)}` }, json: { input: 1, stateId } })
    }
    const states = Array.from({ length: 8 }, (_unused, index) => `state-${index}`)
    // Which states are sampled at 50 %: those compared against the staging V4.
    const compared = await startGateway(shadowConfig(v4, legacy, { percent: 50 }))
    await invokeAll(compared, states)
    await until(async () => (await shadowOf(compared, INVOKE)).matches === v4.requests.filter((request) => request.url !== '/v4/sessions.start').length && legacy.requests.length === 8)
    const sampledCount = (await shadowOf(compared, INVOKE)).matches as number
    expect(sampledCount).toBeGreaterThan(0)
    expect(sampledCount).toBeLessThan(8)

    // The same states where the credential may not go to the shadow upstream: the sampled ones are skipped, the others counted nowhere.
    const skipping = await startGateway(
      testConfig(v4.url, {
        tenants: { acme: { upstream: { staging: v4.url, production: production.url, legacy: legacy.url }, migration: { stage: 'shadow', shadow: { percent: 50, upstream: 'production', allowProductionSideEffects: true } } } }
      })
    )
    await invokeAll(skipping, states)
    await until(async () => legacy.requests.length === 16)
    await until(async () => (await shadowOf(skipping, INVOKE)).skipped === sampledCount)
    expect(await shadowOf(skipping, INVOKE)).toMatchObject({ skipped: sampledCount, comparisons: 0, primaryErrors: 0, dropped: 0 })
    expect(production.requests).toHaveLength(0)

    // At 0 %, nothing is counted, a request the gateway would refuse (a service key) included.
    const none = await startGateway(shadowConfig(v4, legacy, { percent: 0 }))
    await invokeAll(none, states.slice(0, 3))
    await invokeAll(none, states.slice(0, 3), 'key_shadow_service_key_1')
    await until(async () => legacy.requests.length === 22)
    expect(await shadowOf(none, INVOKE)).toMatchObject({ comparisons: 0, matches: 0, mismatches: 0, skipped: 0, dropped: 0 })
  })

  it.each([
    { case: 'abandons comparisons still running at shutdown: the process does not wait for the V4 side', reloadRemovesRoute: false, abandoned: 1 },
    { case: 'does not count as abandoned at shutdown a comparison whose route a reload removed meanwhile', reloadRemovesRoute: true, abandoned: 0 }
  ])('$case', async ({ reloadRemovesRoute, abandoned }) => {
    const v4Side = heldV4()
    const v4 = await startRecordingUpstream(v4Side.handler)
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    try {
      await execute(gw)
      await until(() => v4Side.holding() === 1)
      if (reloadRemovesRoute) {
        const withoutExecute = shadowConfig(v4, legacy)
        ;(withoutExecute.tenants as Record<string, Record<string, unknown>>).acme!.legacy = { routes: LEGACY_V1_ROUTES.filter((route) => `${route.method} ${route.path}` !== EXECUTE) }
        await gw.gateway.applyConfig(configSchema.parse(withoutExecute))
      }
      await gw.close()
      // Closed while V4 still holds the call.
      expect(v4Side.holding()).toBe(1)
      const answer = await gw.gateway.shadow.answer(new Map([['acme', [EXECUTE]]]), Date.now())
      expect(answer.tenants.acme?.[EXECUTE]?.abandoned ?? 0).toBe(abandoned)
    } finally {
      v4Side.release()
    }
  })

  it('abandons a comparison whose legacy answer the grace period\'s end cuts: cut at shutdown, not a legacy failure', async () => {
    const v4 = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    // The legacy side sends its head and half its body, then holds the rest.
    const legacy = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.write('{"output":')
    })
    const gw = await startGateway(shadowConfig(v4, legacy))
    const client = execute(gw).catch(() => undefined)
    await until(() => legacy.requests.length === 1)
    const closing = gw.close()
    // The grace period ends (main.ts cuts what remains then) while the legacy answer is half sent.
    gw.gateway.cutRemaining()
    await closing
    await client
    const answer = await gw.gateway.shadow.answer(new Map([['acme', [EXECUTE]]]), Date.now())
    expect(answer.tenants.acme?.[EXECUTE]).toMatchObject({ abandoned: 1, primaryErrors: 0, comparisons: 1 })
    expect(v4.requests).toHaveLength(0)
  })

  it('abandons a comparison waiting on its sessions.start at shutdown: the process does not wait for the start', async () => {
    const v4Side = heldV4()
    const v4 = await startRecordingUpstream(v4Side.handler)
    const legacy = await startRecordingUpstream((_request, response) => json(response, 200, LEGACY_ANSWER))
    const gw = await startGateway(shadowConfig(v4, legacy))
    try {
      await send(gw.url, '/v1/runs/invoke', { headers: { authorization: `Bearer ${TOKEN}` }, json: { input: 1, stateId: 'held-start' } })
      await until(() => v4Side.holding() === 1)
      expect(v4.requests.map((request) => request.url)).toEqual(['/v4/sessions.start'])
      await gw.close()
      // Closed while V4 still holds the start (it answers after 3 s).
      expect(v4Side.holding()).toBe(1)
      const answer = await gw.gateway.shadow.answer(new Map([['acme', [INVOKE]]]), Date.now())
      expect(answer.tenants.acme?.[INVOKE]).toMatchObject({ abandoned: 1, matches: 0 })
    } finally {
      v4Side.release()
    }
  })
})

describe('SPEC 15 config validation', () => {
  it('refuses upstream: production without allowProductionSideEffects, with the path of the key', async () => {
    const { configSchema } = await import('../../src/config/schema.js')
    const result = configSchema.safeParse(
      testConfig('http://127.0.0.1:9', {
        tenants: { acme: { upstream: { staging: 'http://127.0.0.1:9', production: 'http://127.0.0.1:10', legacy: 'http://127.0.0.1:11' }, migration: { stage: 'shadow', routes: { [EXECUTE]: { shadow: { upstream: 'production' } } } } } }
      })
    )
    expect(result.success).toBe(false)
    const paths = result.error?.issues.map((issue) => issue.path.join('.'))
    expect(paths).toContain(`tenants.acme.migration.routes.${EXECUTE}.shadow.upstream`)
  })

  it('refuses a shadow block on a proxy route and maxSessions on a route', async () => {
    const { configSchema } = await import('../../src/config/schema.js')
    const routes = [
      { method: 'POST', path: '/v1/run', action: 'execute' },
      { method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }
    ]
    const proxy = configSchema.safeParse(testConfig('http://127.0.0.1:9', { tenants: { acme: { upstream: { staging: 'http://127.0.0.1:9' }, legacy: { routes }, migration: { routes: { 'GET /v1/policies': { shadow: { percent: 5 } } } } } } }))
    expect(proxy.error?.issues.map((issue) => issue.path.join('.'))).toContain('tenants.acme.migration.routes.GET /v1/policies.shadow')
    const sessions = configSchema.safeParse(testConfig('http://127.0.0.1:9', { tenants: { acme: { upstream: { staging: 'http://127.0.0.1:9' }, legacy: { routes }, migration: { routes: { 'POST /v1/run': { shadow: { maxSessions: 5 } } } } } } }))
    expect(sessions.success).toBe(false)
  })
})
