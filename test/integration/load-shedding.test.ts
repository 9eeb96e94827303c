import { hash } from 'node:crypto'
import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { expectGatewayError } from '../helpers/gateway-error.js'
import { until } from '../helpers/until.js'
import { answerAfter, startRecordingUpstream, useRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js'
import { startGateway, testConfig } from '../helpers/start-gateway.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }


function upstreamConnections(upstream: RecordingUpstream): Promise<number> {
  return new Promise((resolve, reject) => upstream.server.getConnections((error, count) => (error ? reject(error) : resolve(count))))
}

describe('load shedding', () => {
  const slow = useRecordingUpstream(answerAfter(300, { ok: true }))

  it('answers 503 OVERLOADED with Retry-After past limits.maxInFlight, and serves again once the load goes', async () => {
    const gw = await startGateway(testConfig(slow.url, { limits: { maxInFlight: 5 } }))
    const answers = await Promise.all(Array.from({ length: 12 }, (_, index) => send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: index } })))
    const shed = answers.filter((answer) => answer.status === 503)
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(5)
    expect(shed).toHaveLength(7)
    for (const answer of shed) {
      expectGatewayError(answer, 503, 'OVERLOADED')
      expect(answer.headers['retry-after']).toBe('2')
    }
    expect((await send(gw.url, '/v1/headless/runs', { headers: ALICE, json: { input: 'after' } })).status).toBe(200)
  })

  it('answers a shed legacy request with its route\'s deprecation headers and x-v4gw-served-by: gateway, named on its log line (SPEC 13, 14)', async () => {
    const gw = await startGateway(
      testConfig(slow.url, {
        limits: { maxInFlight: 1 },
        log: { level: 'info' },
        tenants: {
          acme: {
            upstream: { staging: slow.url },
            legacy: { deprecation: { date: '2026-01-01T00:00:00Z', link: 'https://docs.example.com/v4' } },
            migration: { stage: 'translate' }
          }
        }
      })
    )
    const answers = await Promise.all(Array.from({ length: 3 }, (_, index) => send(gw.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-request-id': `shed-${index}` }, json: { input: index } })))
    const shed = answers.filter((answer) => answer.status === 503)
    expect(shed).toHaveLength(2)
    for (const answer of shed) {
      expect(answer.json.error.code).toBe('OVERLOADED')
      expect(answer.headers['retry-after']).toBe('2')
      expect(answer.headers.deprecation).toBe(`@${Date.parse('2026-01-01T00:00:00Z') / 1000}`)
      expect(answer.headers.link).toContain('rel="deprecation"')
      expect(answer.headers['x-v4gw-served-by']).toBe('gateway')
    }
    const shedIds = shed.map((answer) => answer.headers['x-request-id'])
    await until(() => gw.logs.lines().filter((line) => line.msg === 'request' && shedIds.includes(line.requestId as string)).length === 2)
    for (const line of gw.logs.lines().filter((entry) => entry.msg === 'request' && shedIds.includes(entry.requestId as string))) {
      expect(line).toMatchObject({ status: 503, error: 'OVERLOADED', class: 'legacy', route: 'POST /v1/headless/runs', servedBy: 'gateway' })
    }
    // SPEC 12: the shed calls are the client's own, not an `anonymous` one's (which would move lastSeenNonExempt).
    const route = (await send(gw.adminUrl, '/admin/migration?tenant=acme')).json.tenants.acme.routes['POST /v1/headless/runs']
    expect(route.requests).toBe(3)
    expect(route.clients).toEqual([expect.objectContaining({ clientId: `fp:${hash('sha256', 'demo-token-alice', 'hex').slice(0, 16)}`, requests: 3 })])
  })

  it('does not count finished or aborted requests against limits.maxInFlight', async () => {
    const gw = await startGateway(testConfig(slow.url, { limits: { maxInFlight: 2 } }))
    for (let round = 0; round < 5; round++) {
      expect((await send(gw.url, '/v4/anything', { headers: ALICE })).status).toBe(200)
    }
    const inFlight = async (): Promise<number> => Number(/^v4gw_requests_in_flight (\d+)$/m.exec((await send(gw.adminUrl, '/metrics')).text)?.[1] ?? -1)
    const before = slow.requests.length
    const aborted = new AbortController()
    const pending = fetch(new URL('/v4/slow', gw.url), { signal: aborted.signal }).catch(() => undefined)
    // In flight for certain (its call at the upstream) before it is aborted, and counted.
    await until(() => slow.requests.length > before)
    expect(await inFlight()).toBe(1)
    aborted.abort()
    await pending
    await until(async () => (await inFlight()) === 0)
    const both = await Promise.all([send(gw.url, '/v4/a', { headers: ALICE }), send(gw.url, '/v4/b', { headers: ALICE })])
    expect(both.map((answer) => answer.status)).toEqual([200, 200])
  })

  // SPEC 4 step 3: a sessions.start is shared, so its client leaving does not cancel it; SPEC 10:
  // until it ends it holds its request's slot, or a client that sends and hangs up starts calls
  // past maxInFlight (until 2026-11-30 the slot went with the client).
  it('keeps the slot of a session-execute whose client left while its sessions.start runs, until the start ends', async () => {
    let answerStart: () => void = () => undefined
    const upstream = await startRecordingUpstream((request, response) => {
      if (request.url === '/v4/sessions.start') answerStart = () => response.writeHead(201, { 'content-type': 'application/json' }).end('{"sessionId":"s-held"}')
      else response.writeHead(200, { 'content-type': 'application/json' }).end('{"output":1}')
    })
    const gw = await startGateway(testConfig(upstream.url, { limits: { maxInFlight: 1 }, log: { level: 'info' } }))
    const leaving = new AbortController()
    const sent = fetch(new URL('/v1/runs/invoke', gw.url), { method: 'POST', headers: { ...ALICE, 'content-type': 'application/json', 'x-request-id': 'left-during-start' }, body: '{"input":1,"stateId":"held"}', signal: leaving.signal }).catch(() => undefined)
    await until(() => upstream.requests.length === 1)
    leaving.abort()
    await sent
    // Its line is written (499) at once; its slot is still taken.
    await until(() => gw.logs.lines().some((line) => line.msg === 'request' && line.requestId === 'left-during-start'))
    expectGatewayError(await send(gw.url, '/v4/other', { headers: ALICE }), 503, 'OVERLOADED')
    answerStart()
    await until(async () => (await send(gw.url, '/v4/other', { headers: ALICE })).status === 200)
  })

  // Node closes only the response it is writing when a connection goes, not those queued behind it.
  it.each([
    ['native', (index: number) => `GET /v4/pipelined-${index} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\nX-Request-Id: piped-native-${index}\r\n\r\n`],
    [
      'legacy',
      (index: number) => {
        const body = `{"input":${index}}`
        return `POST /v1/headless/runs HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer t\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nX-Request-Id: piped-legacy-${index}\r\n\r\n${body}`
      }
    ]
  ])('frees the slots, upstream calls and access lines of %s requests pipelined on a connection the client closes', async (kind, request) => {
    const stalled = await startRecordingUpstream(() => undefined)
    const gw = await startGateway(testConfig(stalled.url, { limits: { maxInFlight: 4, upstreamTimeoutMs: 30_000 } }))
    const { hostname, port } = new URL(gw.url)
    const socket = connect({ host: hostname, port: Number(port) })
    socket.on('error', () => undefined)
    socket.write(Array.from({ length: 4 }, (_, index) => request(index)).join(''))
    // Node hands every pipelined request to the gateway at once; each starts its upstream call.
    await until(() => stalled.requests.length === 4)
    socket.destroy()

    // One access line each, and their upstream calls cancelled.
    const piped = (): Record<string, unknown>[] => gw.logs.lines().filter((line) => line.msg === 'request' && String(line.requestId).startsWith(`piped-${kind}-`))
    await until(() => piped().length === 4)
    expect(piped().map((line) => line.status)).toEqual([499, 499, 499, 499])
    await until(async () => (await upstreamConnections(stalled)) === 0)

    // Every slot is free again: four requests at once all reach the upstream, none is shed.
    const leaving = new AbortController()
    const again = Array.from({ length: 4 }, (_, index) => fetch(new URL(`/v4/again-${index}`, gw.url), { headers: ALICE, signal: leaving.signal }).catch(() => undefined))
    await until(() => stalled.requests.length === 8)
    leaving.abort()
    await Promise.all(again)
  })

  it('answers 503 OVERLOADED while the event loop is stalled past limits.maxEventLoopDelayMs, then recovers by itself', async () => {
    const gw = await startGateway(testConfig(slow.url, { limits: { maxEventLoopDelayMs: 100 } }))
    const started = Date.now()
    while (Date.now() - started < 1_200) {
      // A stalled event loop, as a CPU-bound neighbour or a GC storm would cause.
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
    const stalled = await send(gw.url, '/v4/x', { headers: ALICE })
    expect(stalled.status).toBe(503)
    expect(stalled.json.error.code).toBe('OVERLOADED')
    expect(stalled.headers['retry-after']).toBe('2')
    await until(async () => (await send(gw.url, '/v4/x', { headers: ALICE })).status === 200)
    // SPEC 17: counted by its reason.
    expect((await send(gw.adminUrl, '/metrics')).text).toMatch(/^v4gw_load_shed_total\{reason="event_loop"\} [1-9]\d*$/m)
  })
})
