import type { ServerResponse } from 'node:http'
import { setTimeout as sleep } from 'node:timers/promises'
import { Client, request as undiciRequest } from 'undici'
import { describe, expect, it } from 'vitest'
import { credentialClientId } from '../../src/credentials/client-id.js'
import { arrivalBarrier } from '../helpers/arrival-barrier.js'
import { send, type Answer } from '../helpers/http.js'
import { startRecordingUpstream, type RecordedRequest, type RecordingUpstream, type UpstreamHandler } from '../helpers/recording-upstream.js'
import { useSimulatorGateway } from '../helpers/simulator-gateway.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { startSimulator } from '../helpers/start-simulator.js'
import { until } from '../helpers/until.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }
const BOB = { authorization: 'Bearer demo-token-bob' }
const START_PATH = '/v4/sessions.start'
const EXECUTION_PATH = /^\/v4\/sessions\/([^/]+)\/executions\.execute$/

/** What the fake V4 upstream answers: status, JSON body (or raw text), optional delay. */
interface FakeAnswer {
  status: number
  body?: unknown
  text?: string
  contentType?: string
  delayMs?: number
  /** Held until this settles (then `delayMs`), so that concurrent callers really overlap. */
  holdUntil?: Promise<void>
}

interface FakeV4 {
  /** The nth sessions.start (1-based); default 201 `{ sessionId: "ses_<n>" }`. */
  start?: (n: number) => FakeAnswer
  /** An execution in `sessionId`; default 200 `{ output: "ok" }` without meta. */
  execute?: (sessionId: string, body: unknown) => FakeAnswer
}

async function write(response: ServerResponse, answer: FakeAnswer): Promise<void> {
  if (answer.holdUntil !== undefined) await answer.holdUntil
  if (answer.delayMs !== undefined) await sleep(answer.delayMs)
  const text = answer.text ?? JSON.stringify(answer.body ?? {})
  response.writeHead(answer.status, { 'content-type': answer.contentType ?? 'application/json' })
  response.end(text)
}

/** A scripted V4 backend for the answers the simulator cannot give on demand. */
function fakeV4(script: FakeV4 = {}): UpstreamHandler {
  let starts = 0
  return async (request, response) => {
    if (request.method === 'POST' && request.url === START_PATH) {
      starts++
      await write(response, script.start?.(starts) ?? { status: 201, body: { sessionId: `ses_${starts}` } })
      return
    }
    const execution = EXECUTION_PATH.exec(request.url)
    if (request.method === 'POST' && execution !== null) {
      const sessionId = decodeURIComponent(execution[1] as string)
      await write(response, script.execute?.(sessionId, JSON.parse(request.body.toString('utf8'))) ?? { status: 200, body: { output: 'ok' } })
      return
    }
    await write(response, { status: 404, body: { error: { code: 'NOT_FOUND' } } })
  }
}

/** The session outcomes the requests logged (SPEC 9), sorted, once all `count` access lines are written. */
async function sessionOutcomes(gw: StartedGateway, count: number): Promise<string[]> {
  const requestLines = (): Record<string, unknown>[] => gw.logs.lines().filter((line) => line.msg === 'request')
  await until(() => requestLines().length === count)
  return requestLines()
    .map((line) => String(line.session))
    .sort()
}

/** One miss (the caller that sent the start) and every other caller coalesced on it, none a later hit: they overlapped. */
function overlapped(count: number): string[] {
  return [...Array<string>(count - 1).fill('coalesced'), 'miss']
}

function startsOf(upstream: RecordingUpstream): RecordedRequest[] {
  return upstream.requests.filter((request) => request.url === START_PATH)
}

function executionsOf(upstream: RecordingUpstream): RecordedRequest[] {
  return upstream.requests.filter((request) => EXECUTION_PATH.test(request.url))
}

function sessionOfExecution(request: RecordedRequest): string {
  return decodeURIComponent(EXECUTION_PATH.exec(request.url)?.[1] ?? '')
}

function bodyOf(request: RecordedRequest): unknown {
  return JSON.parse(request.body.toString('utf8'))
}

function invoke(gatewayUrl: string, json: unknown, headers: Record<string, string> = ALICE, path = '/v1/runs/invoke'): Promise<Answer> {
  return send(gatewayUrl, path, { headers, json })
}

/** A gateway in front of a fake upstream, both closed when the test finishes. */
async function fakeGateway(script: FakeV4, overrides: Record<string, unknown> = {}): Promise<{ upstream: RecordingUpstream; gw: StartedGateway }> {
  const upstream = await startRecordingUpstream(fakeV4(script))
  const gw = await startGateway(testConfig(upstream.url, overrides))
  return { upstream, gw }
}

/**
 * A fake V4 whose executions answer `refusal` in the sessions the test has put in `dead`, and 200
 * (`{ output: "ok" }`, or what `live` makes of the session id) in the others.
 */
function sessionsThatDie(refusal: FakeAnswer, live: (sessionId: string) => FakeAnswer = () => ({ status: 200, body: { output: 'ok' } })): { dead: Set<string>; script: FakeV4 } {
  const dead = new Set<string>()
  return { dead, script: { execute: (sessionId) => (dead.has(sessionId) ? refusal : live(sessionId)) } }
}

describe('session-execute single-flight (SPEC 4 step 3)', () => {
  it('starts exactly one V4 session for 50 concurrent first calls on one key', async () => {
    const allIn = arrivalBarrier(50)
    const { upstream, gw } = await fakeGateway({ start: (n) => ({ status: 201, body: { sessionId: `ses_${n}` }, holdUntil: allIn.arrived, delayMs: 100 }) })
    allIn.watch([gw])
    const answers = await Promise.all(Array.from({ length: 50 }, (_, index) => invoke(gw.url, { input: index, stateId: 'shared', state: { policy: 'p' } })))
    await allIn.arrived
    expect(await sessionOutcomes(gw, 50)).toEqual(overlapped(50))
    expect(startsOf(upstream)).toHaveLength(1)
    expect(answers.map((answer) => answer.status)).toEqual(Array<number>(50).fill(200))
    expect(new Set(answers.map((answer) => answer.headers['x-v4-session-id']))).toEqual(new Set(['ses_1']))
    expect(executionsOf(upstream).map(sessionOfExecution)).toEqual(Array<string>(50).fill('ses_1'))
  })

  it('keeps the shared sessions.start going when the client that began it goes away, for the callers still waiting', async () => {
    const { upstream, gw } = await fakeGateway({ start: (n) => ({ status: 201, body: { sessionId: `ses_${n}` }, delayMs: 300 }) })
    const leaving = new AbortController()
    const first = undiciRequest(`${gw.url}/v1/runs/invoke`, {
      method: 'POST',
      headers: { ...ALICE, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'leaves', stateId: 'shared-start' }),
      signal: leaving.signal
    }).catch((error: unknown) => error)
    await until(() => startsOf(upstream).length === 1)
    const staying = invoke(gw.url, { input: 'stays', stateId: 'shared-start' })
    await sleep(50)
    leaving.abort()
    await first
    const answer = await staying
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4-session-id']).toBe('ses_1')
    expect(startsOf(upstream)).toHaveLength(1)
  })

  // Against the real simulator, without a barrier: the calls may or may not overlap (the test
  // above holds the start until all 50 are in); this one holds the end to end result on it.
  it('starts one simulator session for 50 calls sent at once on one key, all run in it', async () => {
    const sim = await startSimulator()
    const gw = await startGateway(testConfig(sim.url))
    const answers = await Promise.all(Array.from({ length: 50 }, (_, index) => invoke(gw.url, { input: index, stateId: 'sim-shared', risk: 'high' })))
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(1)
    expect(answers.every((answer) => answer.status === 200)).toBe(true)
    expect(new Set(answers.map((answer) => answer.headers['x-v4-session-id'])).size).toBe(1)
    expect(sim.simulator.countCalls('POST', EXECUTION_PATH)).toBe(50)
  })

  it('shares one failing sessions.start among 50 concurrent callers, each getting its status and body as they came', async () => {
    const failure = JSON.stringify({ error: { code: 'BACKEND_DOWN', message: 'try later' }, meta: { requestId: 'up-req-1', timingMs: { total: 1 } } })
    const allIn = arrivalBarrier(50)
    const { upstream, gw } = await fakeGateway({ start: () => ({ status: 500, text: failure, holdUntil: allIn.arrived, delayMs: 100 }) })
    // A failed start caches nothing, so a caller arriving after it settled would start again: hold it until all 50 are in.
    allIn.watch([gw])
    const answers = await Promise.all(Array.from({ length: 50 }, () => invoke(gw.url, { input: 1, stateId: 'failing' })))
    await allIn.arrived
    expect(await sessionOutcomes(gw, 50)).toEqual(overlapped(50))
    expect(startsOf(upstream)).toHaveLength(1)
    expect(executionsOf(upstream)).toHaveLength(0)
    for (const answer of answers) {
      expect(answer.status).toBe(500)
      expect(answer.text).toBe(failure)
    }
  })

  it('caches nothing after a failing sessions.start, so the next call starts again', async () => {
    const script: FakeV4 = { start: (n) => (n === 1 ? { status: 500, body: { error: { code: 'BACKEND_DOWN' } } } : { status: 201, body: { sessionId: `ses_${n}` } }) }
    const { upstream, gw } = await fakeGateway(script)
    expect((await invoke(gw.url, { input: 1, stateId: 'retry-later' })).status).toBe(500)
    expect(gw.gateway.sessionStore.size).toBe(0)
    const second = await invoke(gw.url, { input: 1, stateId: 'retry-later' })
    expect(second.status).toBe(200)
    expect(second.headers['x-v4-session-id']).toBe('ses_2')
    expect(startsOf(upstream)).toHaveLength(2)
  })

  it('answers 502 UPSTREAM_BAD_RESPONSE to every concurrent caller when the shared sessions.start has no session id', async () => {
    const allIn = arrivalBarrier(20)
    const { upstream, gw } = await fakeGateway({ start: () => ({ status: 201, body: {}, holdUntil: allIn.arrived, delayMs: 100 }) })
    allIn.watch([gw])
    const answers = await Promise.all(Array.from({ length: 20 }, () => invoke(gw.url, { input: 1, stateId: 'no-id' })))
    await allIn.arrived
    expect(await sessionOutcomes(gw, 20)).toEqual(overlapped(20))
    expect(startsOf(upstream)).toHaveLength(1)
    for (const answer of answers) {
      expect(answer.status).toBe(502)
      expect(answer.json.error.code).toBe('UPSTREAM_BAD_RESPONSE')
    }
  })
})

describe('session-execute session ids from sessions.start (SPEC 4 step 2)', () => {
  it('answers 502 UPSTREAM_BAD_RESPONSE when sessions.start answers 201 {} and sends no execution', async () => {
    const { upstream, gw } = await fakeGateway({ start: () => ({ status: 201, body: {} }) })
    const answer = await invoke(gw.url, { input: 1 }, { ...ALICE, 'x-request-id': 'bad-start-1' })
    expect(answer.status).toBe(502)
    expect(answer.json.error).toMatchObject({ code: 'UPSTREAM_BAD_RESPONSE', requestId: 'bad-start-1' })
    expect(answer.headers['x-v4-session-id']).toBeUndefined()
    expect(executionsOf(upstream)).toHaveLength(0)
  })

  it.each(['.', '..'])('answers 502 UPSTREAM_BAD_RESPONSE to a session id %j, which would make another path, and sends no execution', async (sessionId) => {
    const { upstream, gw } = await fakeGateway({ start: () => ({ status: 201, body: { sessionId } }) })
    const answer = await invoke(gw.url, { input: 1 })
    expect(answer.status).toBe(502)
    expect(answer.json.error).toMatchObject({ code: 'UPSTREAM_BAD_RESPONSE', message: 'sessions.start answered with a session id that cannot be a path segment' })
    expect(executionsOf(upstream)).toHaveLength(0)
    expect(upstream.requests.filter((request) => request.url !== '/v4/sessions.start')).toEqual([])
  })

  it('caches nothing after a sessions.start without a session id, so the next call starts again', async () => {
    const script: FakeV4 = { start: (n) => ({ status: 201, body: n === 1 ? {} : { sessionId: `ses_${n}` } }) }
    const { upstream, gw } = await fakeGateway(script)
    expect((await invoke(gw.url, { input: 1 })).status).toBe(502)
    expect(gw.gateway.sessionStore.size).toBe(0)
    const second = await invoke(gw.url, { input: 1 })
    expect(second.status).toBe(200)
    expect(second.headers['x-v4-session-id']).toBe('ses_2')
    expect(startsOf(upstream)).toHaveLength(2)
  })

  it('answers 502 UPSTREAM_BAD_RESPONSE when sessions.start answers 2xx with a body that is not JSON', async () => {
    const { gw } = await fakeGateway({ start: () => ({ status: 201, text: 'created', contentType: 'text/plain' }) })
    const answer = await invoke(gw.url, { input: 1 })
    expect(answer.status).toBe(502)
    expect(answer.json.error.code).toBe('UPSTREAM_BAD_RESPONSE')
  })

  it.each([
    ['/sessionId', { sessionId: 'ses_top' }, 'ses_top'],
    ['/id', { id: 'ses_plain_id' }, 'ses_plain_id'],
    ['/session/id', { session: { id: 'ses_nested' } }, 'ses_nested'],
    ['/meta/sessionId', { meta: { sessionId: 'ses_meta' } }, 'ses_meta']
  ])('reads the session id at the default path %s', async (_path, startBody, sessionId) => {
    const { upstream, gw } = await fakeGateway({ start: () => ({ status: 201, body: startBody }) })
    const answer = await invoke(gw.url, { input: 1 })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4-session-id']).toBe(sessionId)
    expect(executionsOf(upstream).map(sessionOfExecution)).toEqual([sessionId])
  })

  it('takes the first default path that holds a string', async () => {
    const { gw } = await fakeGateway({ start: () => ({ status: 201, body: { sessionId: 42, id: 'ses_from_id', meta: { sessionId: 'ses_from_meta' } } }) })
    expect((await invoke(gw.url, { input: 1 })).headers['x-v4-session-id']).toBe('ses_from_id')
  })

  it('honours a custom sessions.sessionIdPaths pointer', async () => {
    const overrides = { sessions: { sessionIdPaths: ['/data/session'] } }
    const { upstream, gw } = await fakeGateway({ start: () => ({ status: 201, body: { sessionId: 'ses_default_place', data: { session: 'ses_custom' } } }) }, overrides)
    const answer = await invoke(gw.url, { input: 1 })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4-session-id']).toBe('ses_custom')
    expect(executionsOf(upstream).map(sessionOfExecution)).toEqual(['ses_custom'])
  })

  it('reads only the custom sessions.sessionIdPaths, not the default ones', async () => {
    const overrides = { sessions: { sessionIdPaths: ['/data/session'] } }
    const { gw } = await fakeGateway({ start: () => ({ status: 201, body: { sessionId: 'ses_default_place' } }) }, overrides)
    const answer = await invoke(gw.url, { input: 1 })
    expect(answer.status).toBe(502)
    expect(answer.json.error.code).toBe('UPSTREAM_BAD_RESPONSE')
  })

  it.each(['ses_✓', 'ses_1\r\nx-injected: 1', 'ses_\u0000', ' ses_1'])('answers 502 UPSTREAM_BAD_RESPONSE to a session id that cannot go in x-v4-session-id (%j), before any execution, and maps nothing', async (sessionId) => {
    const { upstream, gw } = await fakeGateway({ start: () => ({ status: 201, body: { sessionId } }) })
    for (let call = 0; call < 2; call++) {
      const answer = await invoke(gw.url, { input: 1 })
      expect(answer.status).toBe(502)
      expect(answer.json.error.code).toBe('UPSTREAM_BAD_RESPONSE')
    }
    expect(executionsOf(upstream)).toHaveLength(0)
    expect(startsOf(upstream)).toHaveLength(2)
    expect(gw.gateway.sessionStore.size).toBe(0)
  })

  it('percent-encodes the session id in the execution path', async () => {
    const { upstream, gw } = await fakeGateway({ start: () => ({ status: 201, body: { sessionId: 'ses/1 x?' } }) })
    expect((await invoke(gw.url, { input: 1 })).status).toBe(200)
    expect(executionsOf(upstream).map((request) => request.url)).toEqual(['/v4/sessions/ses%2F1%20x%3F/executions.execute'])
  })
})

describe('session-execute non-2xx sessions.start (SPEC 4 step 2)', () => {
  const { sim, gw } = useSimulatorGateway()

  it('returns the simulator 401 AUTH_INVALID for an unknown token as it came and sends no execution', async () => {
    const answer = await invoke(gw.url, { input: 1, stateId: 'unknown-token' }, { authorization: 'Bearer not-a-known-token' })
    expect(answer.status).toBe(401)
    expect(answer.json.error).toEqual({ code: 'AUTH_INVALID', message: 'unknown session token' })
    expect(answer.headers['x-v4-session-id']).toBeUndefined()
    expect(sim.simulator.countCalls('POST', EXECUTION_PATH)).toBe(0)
  })

  it('caches nothing after a non-2xx sessions.start, so the next call starts again', async () => {
    await invoke(gw.url, { input: 1, stateId: 'unknown-token-2' }, { authorization: 'Bearer not-a-known-token' })
    await invoke(gw.url, { input: 1, stateId: 'unknown-token-2' }, { authorization: 'Bearer not-a-known-token' })
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(2)
    expect(gw.gateway.sessionStore.size).toBe(0)
  })

  it('returns a non-JSON sessions.start error byte for byte with its status and content type', async () => {
    const { upstream, gw: fakeGw } = await fakeGateway({ start: () => ({ status: 403, text: 'quota exhausted\n', contentType: 'text/plain; charset=utf-8' }) })
    const answer = await invoke(fakeGw.url, { input: 1 })
    expect(answer.status).toBe(403)
    expect(answer.text).toBe('quota exhausted\n')
    expect(answer.headers['content-type']).toBe('text/plain; charset=utf-8')
    expect(executionsOf(upstream)).toHaveLength(0)
  })

  it('sends sessions.start the caller token as exactly Authorization: Bearer, whichever header it came in', async () => {
    const answer = await invoke(gw.url, { input: 1, stateId: 'token-source' }, { 'x-session-token': 'demo-token-alice' })
    expect(answer.status).toBe(200)
    const [start] = sim.simulator.calls.filter((call) => call.path === START_PATH)
    expect(start?.headers.authorization).toBe('Bearer demo-token-alice')
    expect(start?.headers['x-session-token']).toBeUndefined()
  })

  it('sends the same x-request-id to sessions.start and to the execution', async () => {
    const answer = await invoke(gw.url, { input: 1, stateId: 'request-id' }, { ...ALICE, 'x-request-id': 'trace-42' })
    expect(answer.status).toBe(200)
    expect(sim.simulator.calls.map((call) => call.headers['x-request-id'])).toEqual(['trace-42', 'trace-42'])
  })
})

describe('session-execute session-map keys (SPEC 4 step 1)', () => {
  const { sim, gw } = useSimulatorGateway((url) => ({ tenants: { acme: { upstream: { staging: url } }, beta: { upstream: { staging: url } } } }))

  it('reuses the session for a second call with the same token, stateId and state', async () => {
    const body = { input: 1, stateId: 'same-key', state: { policy: 'p' } }
    const first = await invoke(gw.url, body)
    const second = await invoke(gw.url, body)
    expect(second.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(1)
  })

  it('starts two different sessions for alice and bob with the same stateId and state', async () => {
    const body = { input: 1, stateId: 'shared-by-two', state: { policy: 'p', route: 'r' } }
    const alice = await invoke(gw.url, body, ALICE)
    const bob = await invoke(gw.url, body, BOB)
    expect([alice.status, bob.status]).toEqual([200, 200])
    expect(bob.headers['x-v4-session-id']).not.toBe(alice.headers['x-v4-session-id'])
    expect(sim.simulator.calls.filter((call) => call.path === START_PATH).map((call) => call.headers.authorization)).toEqual([
      'Bearer demo-token-alice',
      'Bearer demo-token-bob'
    ])
  })

  it('keeps using each identity its own session when alice and bob alternate on one stateId', async () => {
    const body = { input: 1, stateId: 'alternating' }
    const alice = await invoke(gw.url, body, ALICE)
    const bob = await invoke(gw.url, body, BOB)
    const aliceAgain = await invoke(gw.url, body, ALICE)
    const bobAgain = await invoke(gw.url, body, BOB)
    expect(aliceAgain.headers['x-v4-session-id']).toBe(alice.headers['x-v4-session-id'])
    expect(bobAgain.headers['x-v4-session-id']).toBe(bob.headers['x-v4-session-id'])
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(2)
  })

  // The connection remembers its last credential's and session key's digests (kernel/connection-memo.ts):
  // a credential that changes between two requests on one connection must never get the other's.
  it('keeps each identity its own session and client id when the credential changes on one kept-alive connection', async () => {
    const connections: unknown[] = []
    const client = new Client(gw.url, { pipelining: 1 })
    client.on('connect', (origin) => connections.push(origin))
    try {
      // Each call's own request id finds its access line among those of the describe's other tests.
      const call = async (headers: Record<string, string>, stateId: string, index: number): Promise<string | undefined> => {
        const response = await client.request({ method: 'POST', path: '/v1/runs/invoke', headers: { ...headers, 'content-type': 'application/json', 'x-request-id': `one-connection-${index}` }, body: JSON.stringify({ input: 1, stateId }) })
        await response.body.text()
        expect(response.statusCode).toBe(200)
        return response.headers['x-v4-session-id'] as string | undefined
      }
      // Repeats in a row (both digests remembered) and changes of credential, of state, and of both.
      const order: [Record<string, string>, string][] = [[ALICE, 'one'], [ALICE, 'one'], [BOB, 'one'], [ALICE, 'one'], [ALICE, 'two'], [BOB, 'two'], [BOB, 'one'], [ALICE, 'two']]
      const sessions: (string | undefined)[] = []
      for (const [index, [headers, stateId]] of order.entries()) sessions.push(await call(headers, stateId, index))
      expect(connections).toHaveLength(1)
      const [aliceOne, aliceOneRepeated, bobOne, aliceOneAgain, aliceTwo, bobTwo, bobOneAgain, aliceTwoAgain] = sessions
      expect(new Set([aliceOne, bobOne, aliceTwo, bobTwo]).size).toBe(4)
      expect([aliceOneRepeated, aliceOneAgain, bobOneAgain, aliceTwoAgain]).toEqual([aliceOne, aliceOne, bobOne, aliceTwo])
      expect(sim.simulator.calls.filter((recorded) => recorded.path === START_PATH).map((recorded) => recorded.headers.authorization)).toEqual([
        'Bearer demo-token-alice',
        'Bearer demo-token-bob',
        'Bearer demo-token-alice',
        'Bearer demo-token-bob'
      ])
      const lineOf = (index: number): Record<string, unknown> | undefined => gw.logs.lines().find((line) => line.msg === 'request' && line.requestId === `one-connection-${index}`)
      await until(() => order.every((_, index) => lineOf(index) !== undefined))
      const clientIds = order.map((_, index) => lineOf(index)?.clientId)
      expect(clientIds).toEqual(order.map(([headers]) => credentialClientId((headers.authorization as string).slice('Bearer '.length))))
    } finally {
      await client.close()
    }
  })

  it('starts two different sessions for one identity in two tenants', async () => {
    const body = { input: 1, stateId: 'two-tenants' }
    const acme = await invoke(gw.url, body, { ...ALICE, 'x-tenant-id': 'acme' })
    const beta = await invoke(gw.url, body, { ...ALICE, 'x-tenant-id': 'beta' })
    expect([acme.status, beta.status]).toEqual([200, 200])
    expect(beta.headers['x-v4-session-id']).not.toBe(acme.headers['x-v4-session-id'])
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(2)
    expect(gw.gateway.sessionStore.countByTenant()).toMatchObject({ acme: expect.any(Number), beta: expect.any(Number) })
  })

  it('starts different sessions for different state defaults on one stateId', async () => {
    const strict = await invoke(gw.url, { input: 1, stateId: 'defaults', state: { policy: 'strict' } })
    const loose = await invoke(gw.url, { input: 1, stateId: 'defaults', state: { policy: 'loose' } })
    const risky = await invoke(gw.url, { input: 1, stateId: 'defaults', state: { policy: 'strict' }, risk: 'high' })
    expect(new Set([strict, loose, risky].map((answer) => answer.headers['x-v4-session-id'])).size).toBe(3)
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(3)
  })

  it('starts different sessions for different stateIds', async () => {
    const one = await invoke(gw.url, { input: 1, stateId: 'state-one' })
    const two = await invoke(gw.url, { input: 1, stateId: 'state-two' })
    expect(two.headers['x-v4-session-id']).not.toBe(one.headers['x-v4-session-id'])
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(2)
  })

  it('starts different sessions for stateIds that differ only in lone surrogates', async () => {
    // The body carries each as a \u escape; hashed as UTF-8, all three would read U+FFFD: one session.
    const answers = []
    for (const stateId of ['\ud800', '\udc00', '\ufffd']) answers.push(await invoke(gw.url, { input: 1, stateId }))
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200])
    expect(new Set(answers.map((answer) => answer.headers['x-v4-session-id'])).size).toBe(3)
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(3)
  })

  it('does not let per-call policy and route choose another session', async () => {
    const first = await invoke(gw.url, { input: 1, stateId: 'per-call' })
    const second = await invoke(gw.url, { input: 1, stateId: 'per-call', policy: 'override', route: 'other' })
    expect(second.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
  })

  it('uses the runId of /v1/runs/:runId/invoke as the state key', async () => {
    const first = await invoke(gw.url, { input: 1 }, ALICE, '/v1/runs/run-a/invoke')
    const again = await invoke(gw.url, { input: 2 }, ALICE, '/v1/runs/run-a/invoke')
    const other = await invoke(gw.url, { input: 1 }, ALICE, '/v1/runs/run-b/invoke')
    expect([first.status, again.status, other.status]).toEqual([200, 200, 200])
    expect(again.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
    expect(other.headers['x-v4-session-id']).not.toBe(first.headers['x-v4-session-id'])
    expect(sim.simulator.countCalls('POST', START_PATH)).toBe(2)
  })

  it('keys /v1/runs/:runId/invoke by the runId, not by a body stateId', async () => {
    const first = await invoke(gw.url, { input: 1, stateId: 'body-one' }, ALICE, '/v1/runs/run-c/invoke')
    const second = await invoke(gw.url, { input: 1, stateId: 'body-two' }, ALICE, '/v1/runs/run-c/invoke')
    expect(second.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
  })
})

describe('session-execute defaults (SPEC 4 steps 2 and 4)', () => {
  const { sim, gw } = useSimulatorGateway()

  function startBodies(): unknown[] {
    return sim.simulator.calls.filter((call) => call.path === START_PATH).map((call) => call.body)
  }

  function executionBodies(): unknown[] {
    return sim.simulator.calls.filter((call) => EXECUTION_PATH.test(call.path)).map((call) => call.body)
  }

  it('sends sessions.start the state merged with a top-level risk', async () => {
    await invoke(gw.url, { input: 1, stateId: 'merge', state: { policy: 'p1', route: 'r1' }, risk: 'high' })
    expect(startBodies()).toEqual([{ policy: 'p1', route: 'r1', risk: 'high' }])
  })

  it('lets a top-level risk win over the state risk', async () => {
    await invoke(gw.url, { input: 1, stateId: 'risk-wins', state: { risk: 'low' }, risk: 'high' })
    expect(startBodies()).toEqual([{ risk: 'high' }])
  })

  it('sends sessions.start only the state fields that were given', async () => {
    await invoke(gw.url, { input: 1, stateId: 'only-route', state: { route: 'r1' } })
    expect(startBodies()).toEqual([{ route: 'r1' }])
  })

  it('sends sessions.start an empty object when neither state nor risk was given', async () => {
    await invoke(gw.url, { input: 1, stateId: 'no-defaults' })
    expect(startBodies()).toEqual([{}])
  })

  it('never sends top-level policy and route or unknown fields to sessions.start', async () => {
    await invoke(gw.url, { input: 1, stateId: 'no-leak', policy: 'p', route: 'r', trace: 'abc', extra: { a: 1 } })
    expect(startBodies()).toEqual([{}])
  })

  it('sends the execution only { input } when no per-call policy or route was given', async () => {
    await invoke(gw.url, { input: { q: 1 }, stateId: 'exec-only-input', state: { policy: 'p', route: 'r', risk: 'high' }, risk: 'high' })
    expect(executionBodies()).toEqual([{ input: { q: 1 } }])
  })

  it('sends the execution top-level policy and route as per-call overrides', async () => {
    await invoke(gw.url, { input: null, stateId: 'exec-overrides', policy: 'override', route: 'r2' })
    expect(executionBodies()).toEqual([{ input: null, policy: 'override', route: 'r2' }])
  })

  it('shows the session defaults inherited by the execution in the simulator effective context', async () => {
    const answer = await invoke(gw.url, { input: 1, stateId: 'inherit', state: { policy: 'strict', route: 'fast' }, risk: 'high' })
    expect(answer.status).toBe(200)
    expect(answer.json.effective).toEqual({ policy: 'strict', route: 'fast', risk: 'high' })
  })

  it('shows a per-call policy overriding the session default while route and risk are inherited', async () => {
    const answer = await invoke(gw.url, { input: 1, stateId: 'override', state: { policy: 'strict', route: 'fast', risk: 'medium' }, policy: 'loose' })
    expect(answer.json.effective).toEqual({ policy: 'loose', route: 'fast', risk: 'medium' })
  })

  it('shows the backend defaults when the session has no defaults', async () => {
    const answer = await invoke(gw.url, { input: 1, stateId: 'backend-defaults' })
    expect(answer.json.effective).toEqual({ policy: 'default', route: 'standard', risk: 'low' })
  })
})

describe('session-execute stale sessions (SPEC 4 step 5)', () => {
  it('replaces a session the simulator expired (410), re-sends once and answers 200 with the new x-v4-session-id', async () => {
    const sim = await startSimulator()
    const gw = await startGateway(testConfig(sim.url))
    const first = await invoke(gw.url, { input: 1, stateId: 'expiring' })
    const oldId = first.headers['x-v4-session-id'] as string
    sim.simulator.expireSession(oldId)
    sim.simulator.resetCalls()
    const second = await invoke(gw.url, { input: 2, stateId: 'expiring' })
    expect(second.status).toBe(200)
    const newId = second.headers['x-v4-session-id'] as string
    expect(newId).not.toBe(oldId)
    expect(second.json.meta.sessionId).toBe(newId)
    expect(sim.simulator.calls.map((call) => call.path)).toEqual([
      `/v4/sessions/${oldId}/executions.execute`,
      START_PATH,
      `/v4/sessions/${newId}/executions.execute`
    ])
  })

  it('retries once in a new session when the execution of a mapped session answers 404', async () => {
    const { dead, script } = sessionsThatDie({ status: 404, body: { error: { code: 'SESSION_NOT_FOUND' } } }, (sessionId) => ({ status: 200, body: { output: sessionId } }))
    const { upstream, gw } = await fakeGateway(script)
    await invoke(gw.url, { input: 1 })
    dead.add('ses_1')
    const answer = await invoke(gw.url, { input: 2 })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4-session-id']).toBe('ses_2')
    expect(answer.json.output).toBe('ses_2')
    expect(executionsOf(upstream).map(sessionOfExecution)).toEqual(['ses_1', 'ses_1', 'ses_2'])
    expect(executionsOf(upstream).slice(1).map(bodyOf)).toEqual([{ input: 2 }, { input: 2 }])
    // SPEC 9: the stale entry's eviction and the retry are in the session-map events.
    const metrics = (await send(gw.adminUrl, '/metrics')).text
    expect(metrics).toMatch(/v4gw_session_map_events_total\{event="evicted"\} 1\n/)
    expect(metrics).toMatch(/v4gw_session_map_events_total\{event="stale-retry"\} 1\n/)
  })

  it('keeps the replacement session for the next call after a stale retry', async () => {
    const { dead, script } = sessionsThatDie({ status: 404, body: {} })
    const { upstream, gw } = await fakeGateway(script)
    await invoke(gw.url, { input: 1 })
    dead.add('ses_1')
    await invoke(gw.url, { input: 2 })
    const third = await invoke(gw.url, { input: 3 })
    expect(third.headers['x-v4-session-id']).toBe('ses_2')
    expect(startsOf(upstream)).toHaveLength(2)
  })

  it('returns the 404 of the retry as it came and does not retry again', async () => {
    let allDead = false
    const notFound = JSON.stringify({ error: { code: 'SESSION_NOT_FOUND', message: 'gone' }, meta: { requestId: 'up', timingMs: { total: 1 } } })
    const script: FakeV4 = { execute: () => (allDead ? { status: 404, text: notFound } : { status: 200, body: { output: 'ok' } }) }
    const { upstream, gw } = await fakeGateway(script)
    await invoke(gw.url, { input: 1 })
    allDead = true
    const answer = await invoke(gw.url, { input: 2 })
    expect(answer.status).toBe(404)
    expect(answer.json.error).toEqual({ code: 'SESSION_NOT_FOUND', message: 'gone' })
    expect(startsOf(upstream)).toHaveLength(2)
    expect(executionsOf(upstream).map(sessionOfExecution)).toEqual(['ses_1', 'ses_1', 'ses_2'])
  })

  it('does not retry a 404 from a session started by the same request', async () => {
    const { upstream, gw } = await fakeGateway({ execute: () => ({ status: 404, body: { error: { code: 'SESSION_NOT_FOUND' } } }) })
    const answer = await invoke(gw.url, { input: 1 })
    expect(answer.status).toBe(404)
    expect(answer.json.error.code).toBe('SESSION_NOT_FOUND')
    expect(startsOf(upstream)).toHaveLength(1)
    expect(executionsOf(upstream)).toHaveLength(1)
  })

  it('treats a custom sessions.staleStatuses entry as stale', async () => {
    const { dead, script } = sessionsThatDie({ status: 409, body: { error: { code: 'SESSION_CLOSED' } } })
    const { upstream, gw } = await fakeGateway(script, { sessions: { staleStatuses: [409] } })
    await invoke(gw.url, { input: 1 })
    dead.add('ses_1')
    const answer = await invoke(gw.url, { input: 2 })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4-session-id']).toBe('ses_2')
    expect(startsOf(upstream)).toHaveLength(2)
  })

  it('no longer treats 404 as stale when custom sessions.staleStatuses leave it out', async () => {
    const { dead, script } = sessionsThatDie({ status: 404, body: { error: { code: 'SESSION_NOT_FOUND' } } })
    const { upstream, gw } = await fakeGateway(script, { sessions: { staleStatuses: [409] } })
    await invoke(gw.url, { input: 1 })
    dead.add('ses_1')
    const answer = await invoke(gw.url, { input: 2 })
    expect(answer.status).toBe(404)
    expect(startsOf(upstream)).toHaveLength(1)
  })
})

describe('session-execute 401 on an execution (SPEC 4 step 5)', () => {
  const unauthorized = JSON.stringify({ error: { code: 'AUTH_INVALID', message: 'token expired' }, meta: { requestId: 'up', timingMs: { total: 1 } } })

  it('returns a 401 on the execution of a mapped session as it came', async () => {
    const { dead: refused, script } = sessionsThatDie({ status: 401, text: unauthorized })
    const { upstream, gw } = await fakeGateway(script)
    await invoke(gw.url, { input: 1 })
    refused.add('ses_1')
    const answer = await invoke(gw.url, { input: 2 })
    expect(answer.status).toBe(401)
    expect(answer.json.error).toEqual({ code: 'AUTH_INVALID', message: 'token expired' })
    expect(startsOf(upstream)).toHaveLength(1)
  })

  it('evicts the entry after a 401, so the next call starts a new session', async () => {
    const { dead: refused, script } = sessionsThatDie({ status: 401, text: unauthorized })
    const { upstream, gw } = await fakeGateway(script)
    await invoke(gw.url, { input: 1 })
    refused.add('ses_1')
    await invoke(gw.url, { input: 2 })
    expect(gw.gateway.sessionStore.size).toBe(0)
    const third = await invoke(gw.url, { input: 3 })
    expect(third.status).toBe(200)
    expect(third.headers['x-v4-session-id']).toBe('ses_2')
    expect(startsOf(upstream)).toHaveLength(2)
  })

  it('evicts a session started by the same request when its execution answers 401', async () => {
    let refuse = true
    const script: FakeV4 = { execute: () => (refuse ? { status: 401, text: unauthorized } : { status: 200, body: { output: 'ok' } }) }
    const { upstream, gw } = await fakeGateway(script)
    expect((await invoke(gw.url, { input: 1 })).status).toBe(401)
    refuse = false
    const second = await invoke(gw.url, { input: 2 })
    expect(second.headers['x-v4-session-id']).toBe('ses_2')
    expect(startsOf(upstream)).toHaveLength(2)
  })

  it('evicts the replacement session when the execution re-sent after a stale answer gets 401', async () => {
    const script: FakeV4 = {
      execute: (sessionId) => {
        if (sessionId === 'ses_1') return { status: 404, body: { error: { code: 'SESSION_NOT_FOUND' } } }
        return { status: 401, text: unauthorized }
      }
    }
    const { upstream, gw } = await fakeGateway(script)
    // Map ses_1 without going through an execution: a first call whose execution 404s keeps its fresh entry.
    expect((await invoke(gw.url, { input: 1 })).status).toBe(404)
    const answer = await invoke(gw.url, { input: 2 })
    expect(answer.status).toBe(401)
    expect(answer.json.error).toEqual({ code: 'AUTH_INVALID', message: 'token expired' })
    expect(executionsOf(upstream).map(sessionOfExecution)).toEqual(['ses_1', 'ses_1', 'ses_2'])
    expect(gw.gateway.sessionStore.size).toBe(0)
  })
})

describe('session-execute response (SPEC 4 step 6, SPEC 6)', () => {
  it('adds x-v4-session-id and fills meta.sessionId when the execution answer has no meta', async () => {
    const { gw } = await fakeGateway({ execute: () => ({ status: 200, body: { output: 'ok' } }) })
    const answer = await invoke(gw.url, { input: 1 }, { ...ALICE, 'x-request-id': 'meta-fill-1' })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4-session-id']).toBe('ses_1')
    expect(answer.json.meta).toMatchObject({ sessionId: 'ses_1', requestId: 'meta-fill-1' })
    expect(typeof answer.json.meta.timingMs.total).toBe('number')
  })

  it('keeps a meta.sessionId the execution answer already has', async () => {
    const meta = { requestId: 'up-1', sessionId: 'ses_as_upstream_says', timingMs: { total: 2 } }
    const { gw } = await fakeGateway({ execute: () => ({ status: 200, body: { output: 'ok', meta } }) })
    const answer = await invoke(gw.url, { input: 1 })
    expect(answer.json.meta).toEqual(meta)
    expect(answer.headers['x-v4-session-id']).toBe('ses_1')
  })

  it('adds x-v4-session-id to a non-2xx execution answer too', async () => {
    const { gw } = await fakeGateway({ execute: () => ({ status: 422, body: { error: { code: 'INPUT_REJECTED' } } }) })
    const answer = await invoke(gw.url, { input: 1 })
    expect(answer.status).toBe(422)
    expect(answer.headers['x-v4-session-id']).toBe('ses_1')
  })
})

describe('session-execute map bounds (SPEC 4)', () => {
  it('drops the least recently used entry beyond sessions.maxEntries', async () => {
    const { upstream, gw } = await fakeGateway({}, { sessions: { maxEntries: 2 } })
    await invoke(gw.url, { input: 1, stateId: 'a' })
    await invoke(gw.url, { input: 1, stateId: 'b' })
    await invoke(gw.url, { input: 1, stateId: 'c' })
    expect(gw.gateway.sessionStore.size).toBe(2)
    const again = await invoke(gw.url, { input: 1, stateId: 'a' })
    expect(again.headers['x-v4-session-id']).toBe('ses_4')
    expect(startsOf(upstream)).toHaveLength(4)
    // A map too small for its traffic shows in the metrics: 'c' pushed out 'a', then 'a' pushed out 'b'.
    const metrics = (await send(gw.adminUrl, '/metrics')).text
    expect(metrics).toMatch(/v4gw_session_map_events_total\{event="capacity-evicted"\} 2\n/)
    expect(metrics).not.toMatch(/event="evicted"/)
  })

  it('starts a new session once sessions.ttlMs has passed since the entry was created', async () => {
    const { upstream, gw } = await fakeGateway({}, { sessions: { ttlMs: 80 } })
    const first = await invoke(gw.url, { input: 1, stateId: 'short-lived' })
    await sleep(120)
    const second = await invoke(gw.url, { input: 1, stateId: 'short-lived' })
    expect(first.headers['x-v4-session-id']).toBe('ses_1')
    expect(second.headers['x-v4-session-id']).toBe('ses_2')
    expect(startsOf(upstream)).toHaveLength(2)
  })
})
