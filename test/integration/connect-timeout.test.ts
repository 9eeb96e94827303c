import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { send, type Answer } from '../helpers/http.js'
import { useSilentAddress } from '../helpers/network-namespace.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { startRecordingUpstream } from '../helpers/recording-upstream.js'
import { until, within } from '../helpers/until.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }
const CONNECT_TIMEOUT_MS = 300
/** Far above the connect timeout, so that an answer well before it can only be the connect timeout's. */
const UPSTREAM_TIMEOUT_MS = 20_000
/**
 * Generous: undici's connect timer runs on its coarse clock (a tick about every half second), so a
 * 300 ms timeout ends the connect after about a second; an answer this late means it did not.
 */
const ANSWER_WITHIN_MS = 5_000

/** What a plain connect to `host:port` does within `ms`: connects, fails with a code, or neither. */
function connectOutcome(host: string, port: number, ms: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host, port })
    const done = (outcome: string): void => {
      clearTimeout(timer)
      socket.destroy()
      resolve(outcome)
    }
    const timer = setTimeout(() => done('pending'), ms)
    socket.once('connect', () => done('connected'))
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message))
  })
}

/** A call to `gateway` and how long its answer took; one that takes too long fails the test. */
async function timed(gateway: StartedGateway, call: Promise<Answer>): Promise<{ answer: Answer; elapsedMs: number }> {
  const startedAt = performance.now()
  try {
    const answer = await within(call, ANSWER_WITHIN_MS, `no answer within ${ANSWER_WITHIN_MS} ms: limits.connectTimeoutMs (${CONNECT_TIMEOUT_MS} ms) did not end the hung connect`)
    return { answer, elapsedMs: performance.now() - startedAt }
  } catch (error) {
    // As at the end of the grace period: the hung call would otherwise hold the gateway's close (its teardown).
    gateway.gateway.cutRemaining()
    throw error
  }
}

function seriesValue(text: string, name: string, labels: string): number | undefined {
  const line = text.split('\n').find((one) => one.startsWith(`${name}{${labels}} `))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}

async function scrape(gateway: StartedGateway): Promise<string> {
  return (await send(gateway.adminUrl, '/metrics')).text
}

/**
 * limits.connectTimeoutMs on real sockets: the upstream's address is one whose SYNs are dropped
 * without an answer (a host route into a network namespace that does not forward it), so the
 * gateway's connect hangs until its own timer ends it. SPEC 6: 504 UPSTREAM_TIMEOUT; SPEC 17: an
 * upstream failure with cause="timeout".
 */
describe('an upstream whose connect never completes', () => {
  const silent = useSilentAddress()
  const PORT = 8080

  it('is silent: a plain connect to it neither completes nor fails', async () => {
    // The premise of the next test: were SYNs answered (a reset, an ICMP error), it would test something else.
    expect(await connectOutcome(silent.address, PORT, 2 * CONNECT_TIMEOUT_MS)).toBe('pending')
  })

  it('is answered 504 UPSTREAM_TIMEOUT after limits.connectTimeoutMs, well before limits.upstreamTimeoutMs, and counted as cause="timeout"', async () => {
    const gateway = await startGateway(testConfig(`http://${silent.address}:${PORT}`, { limits: { connectTimeoutMs: CONNECT_TIMEOUT_MS, upstreamTimeoutMs: UPSTREAM_TIMEOUT_MS } }))
    // Native passthrough (a streamed call) and a legacy route (a buffered call): the pool's one connector serves both.
    const native = await timed(gateway, send(gateway.url, '/v4/execute', { headers: ALICE, json: { input: 1 } }))
    const legacy = await timed(gateway, send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } }))
    for (const { answer, elapsedMs } of [native, legacy]) {
      expect(answer.status).toBe(504)
      expect(answer.headers['content-type']).toMatch(/^application\/json/)
      expect(answer.json).toMatchObject({ error: { code: 'UPSTREAM_TIMEOUT', requestId: answer.headers['x-request-id'] } })
      // Not before the connect timer (a failure of its own would not be a timeout), and long before the upstream timeout.
      expect(elapsedMs).toBeGreaterThanOrEqual(CONNECT_TIMEOUT_MS * 0.8)
      expect(elapsedMs).toBeLessThan(ANSWER_WITHIN_MS)
    }
    expect(seriesValue(await scrape(gateway), 'v4gw_upstream_failures_total', 'tenant="acme",upstream="v4",cause="timeout"')).toBe(2)
  })

  /**
   * A gateway in stage shadow whose shadow upstream is the silent address: each comparison's V4
   * call connects until the connect timeout, far above the shadow's own limits.
   */
  async function shadowingIntoSilence(shadow: Record<string, unknown>): Promise<StartedGateway> {
    const v4 = await startRecordingUpstream()
    const legacy = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"output":{"echo":1}}')
    })
    return startGateway(
      testConfig(v4.url, {
        limits: { connectTimeoutMs: UPSTREAM_TIMEOUT_MS },
        tenants: {
          acme: {
            upstream: { staging: v4.url, production: `http://${silent.address}:${PORT}`, legacy: legacy.url },
            migration: { stage: 'shadow', shadow: { upstream: 'production', allowProductionSideEffects: true, forwardCredentials: true, ...shadow } }
          }
        }
      })
    )
  }

  async function shadowOf(gateway: StartedGateway, route: string): Promise<Record<string, number>> {
    return (await send(gateway.adminUrl, '/admin/shadow?tenant=acme')).json.tenants.acme[route] ?? {}
  }

  it('ends a shadow comparison at shadow.timeoutMs while its V4 call is still connecting (candidate_error), its slot held until that call ends (SPEC 15)', async () => {
    const gateway = await shadowingIntoSilence({ timeoutMs: 300, maxInFlight: 1 })
    const route = 'POST /v1/headless/runs'
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(200)
    await until(async () => (await shadowOf(gateway, route)).candidateErrors === 1, ANSWER_WITHIN_MS)
    expect(seriesValue(await scrape(gateway), 'v4gw_upstream_failures_total', 'tenant="acme",upstream="shadow",cause="timeout"')).toBe(1)
    // Its socket is still connecting: the tenant's one slot is taken, so the next comparison is dropped.
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 2 } })).status).toBe(200)
    await until(async () => (await shadowOf(gateway, route)).dropped === 1, ANSWER_WITHIN_MS)
    expect(await shadowOf(gateway, route)).toMatchObject({ candidateErrors: 1, dropped: 1, abandoned: 0 })
    // Shutdown does not count the one it let go as abandoned too.
    await within(gateway.close(), ANSWER_WITHIN_MS, 'close waited for a comparison still connecting')
    const after = await gateway.gateway.shadow.answer(new Map([['acme', [route]]]), Date.now())
    expect(after.tenants.acme?.[route]).toMatchObject({ candidateErrors: 1, dropped: 1, abandoned: 0 })
  })

  it('counts a hung sessions.start that comparisons share once, however many of them it let go at shadow.timeoutMs (SPEC 15, 17)', async () => {
    const gateway = await shadowingIntoSilence({ timeoutMs: 300 })
    // One state: the second comparison waits on the first one's sessions.start, still connecting.
    for (const expected of [1, 2]) {
      expect((await send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: expected, stateId: 'st-hung' } })).status).toBe(200)
      await until(async () => (await shadowOf(gateway, 'POST /v1/runs/invoke')).candidateErrors === expected, ANSWER_WITHIN_MS)
    }
    expect(seriesValue(await scrape(gateway), 'v4gw_upstream_failures_total', 'tenant="acme",upstream="shadow",cause="timeout"')).toBe(1)
  })

  it('closes once client requests are done, abandoning a comparison whose V4 call is still connecting (SPEC 15: nothing waits for a V4 side)', async () => {
    const gateway = await shadowingIntoSilence({ timeoutMs: UPSTREAM_TIMEOUT_MS })
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(200)
    // The comparison starts as the answer closes, and then connects for as long as the connect timeout lets it.
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(await shadowOf(gateway, 'POST /v1/headless/runs')).toMatchObject({ comparisons: 0, candidateErrors: 0, abandoned: 0 })
    await within(gateway.close(), ANSWER_WITHIN_MS, 'close waited for a comparison still connecting')
    // It was there, and was cut at shutdown: `abandoned` (SPEC 15), not a candidate error.
    const after = await gateway.gateway.shadow.answer(new Map([['acme', ['POST /v1/headless/runs']]]), Date.now())
    expect(after.tenants.acme?.['POST /v1/headless/runs']).toMatchObject({ comparisons: 1, candidateErrors: 0, abandoned: 1 })
  })
})
