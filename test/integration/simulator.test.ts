import { describe, it, expect, beforeAll, afterAll } from 'vitest'
import { setTimeout as sleep } from 'node:timers/promises'
import { createSimulator, DEFAULT_SIMULATOR_OPTIONS } from '../../src/simulator/index.js'
import type { Simulator, SimulatorOptions } from '../../src/simulator/index.js'
import { send as sendLines } from '../helpers/http.js'
import { buildRawRequest, parseRawResponse, rawExchange } from '../helpers/raw-http.js'
import { connect } from 'node:net'
import { once } from 'node:events'

interface WireMeta {
  requestId: string
  sessionId?: string
  executionId?: string
  lineageId?: string
  timingMs: { total: number }
}

interface WireBody {
  error?: { code: string; message: string }
  meta: WireMeta
  sessionId?: string
  defaults?: Record<string, string>
  output?: unknown
  effective?: { policy: string; route: string; risk: string }
  policies?: Array<Record<string, unknown>>
  policy?: Record<string, unknown>
}

interface Answer {
  status: number
  body: WireBody
}

interface SendOptions {
  headers?: Record<string, string>
  /** Sent as JSON with content-type application/json. */
  json?: unknown
  /** Sent as is; set content-type in headers. */
  raw?: string
}

const ALICE = { authorization: 'Bearer demo-token-alice' }
const BOB = { authorization: 'Bearer demo-token-bob' }
const ADMIN_KEY = { 'x-service-api-key': 'key_demo_admin' }

async function send (baseUrl: string, method: string, path: string, options: SendOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers }
  let body: string | undefined = options.raw
  if (options.json !== undefined) {
    headers['content-type'] ??= 'application/json'
    body = JSON.stringify(options.json)
  }
  const response = await fetch(`${baseUrl}${path}`, { method, headers, body })
  const text = await response.text()
  return { status: response.status, body: (text === '' ? undefined : JSON.parse(text)) as WireBody }
}

async function withSimulator (
  options: SimulatorOptions,
  run: (baseUrl: string, simulator: Simulator) => Promise<void>
): Promise<void> {
  const simulator = createSimulator(options)
  try {
    await run(await simulator.listen(), simulator)
  } finally {
    await simulator.close()
  }
}

function executionPath (sessionId: string): string {
  return `/v4/sessions/${sessionId}/executions.execute`
}

let simulator: Simulator
let baseUrl: string

async function startSession (headers: Record<string, string>, defaults: Record<string, unknown> = {}): Promise<string> {
  const answer = await send(baseUrl, 'POST', '/v4/sessions.start', { headers, json: defaults })
  expect(answer.status).toBe(201)
  const sessionId = answer.body.sessionId
  if (sessionId === undefined) throw new Error('sessions.start answered without a sessionId')
  return sessionId
}

beforeAll(async () => {
  simulator = createSimulator()
  baseUrl = await simulator.listen()
})

afterAll(async () => {
  await simulator.close()
})

describe('simulator runtime auth (contract part 5)', () => {
  const runtimeCalls = [
    ['sessions.start', '/v4/sessions.start', {}],
    ['executions.execute', '/v4/sessions/ses_any/executions.execute', { input: 1 }],
    ['execute', '/v4/execute', { input: 1 }]
  ] as const

  it.each(runtimeCalls)('answers 401 AUTH_INVALID when %s gets no Authorization header', async (_name, path, json) => {
    const answer = await send(baseUrl, 'POST', path, { json })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
    expect(answer.body.error?.message).toMatch(/missing session token/)
  })

  it.each(runtimeCalls)('answers 401 AUTH_INVALID when %s gets only x-service-api-key', async (_name, path, json) => {
    const answer = await send(baseUrl, 'POST', path, { headers: ADMIN_KEY, json })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
    expect(answer.body.error?.message).toMatch(/missing session token/)
  })

  it.each(runtimeCalls)('answers 401 AUTH_INVALID when a key_* token calls %s', async (_name, path, json) => {
    const answer = await send(baseUrl, 'POST', path, { headers: { authorization: 'Bearer key_demo_admin' }, json })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
    expect(answer.body.error?.message).toMatch(/missing session token/)
    expect(answer.body.error?.message).toMatch(/admin\/config APIs only/)
  })

  it.each(runtimeCalls)('answers 401 INVALID_CREDENTIAL_TYPE when an sa_* identifier is the bearer token on %s', async (_name, path, json) => {
    const answer = await send(baseUrl, 'POST', path, { headers: { authorization: 'Bearer sa_demo' }, json })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('INVALID_CREDENTIAL_TYPE')
  })

  it.each(runtimeCalls)('answers 401 AUTH_INVALID when %s gets an unknown session token', async (_name, path, json) => {
    const answer = await send(baseUrl, 'POST', path, { headers: { authorization: 'Bearer not-a-known-token' }, json })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
  })

  it('answers 401 AUTH_INVALID when Authorization uses a scheme other than Bearer', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { authorization: 'Token demo-token-alice' }, json: { input: 1 } })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
  })

  it('answers 401 AUTH_INVALID when the Bearer value is empty', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { authorization: 'Bearer' }, json: { input: 1 } })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
  })

  it('accepts the Bearer scheme in any letter case', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { authorization: 'bEaReR demo-token-bob' }, json: { input: 1 } })
    expect(answer.status).toBe(200)
  })

  it('never repeats the presented token in an error message', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { authorization: 'Bearer secret-token-xyz' }, json: { input: 1 } })
    expect(JSON.stringify(answer.body)).not.toContain('secret-token-xyz')
  })
})

describe('simulator admin/config auth (contract part 5)', () => {
  it('answers 200 with the seeded default policy when a known service key lists policies', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: ADMIN_KEY })
    expect(answer.status).toBe(200)
    expect(answer.body.policies).toContainEqual(expect.objectContaining({ name: 'default' }))
  })

  it('answers 200 when a session token without the admin role lists policies', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: BOB })
    expect(answer.status).toBe(200)
  })

  it('answers 201 with an id when an admin service key creates a policy', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/policies', { headers: ADMIN_KEY, json: { name: 'strict', level: 3 } })
    expect(answer.status).toBe(201)
    expect(answer.body.policy).toMatchObject({ name: 'strict', level: 3 })
    expect(answer.body.policy?.id).toMatch(/^pol_/)
  })

  it('answers 201 when a session token with the admin role creates a policy', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/policies', { headers: ALICE, json: { name: 'alice-policy' } })
    expect(answer.status).toBe(201)
  })

  it('lists a created policy afterwards', async () => {
    await send(baseUrl, 'POST', '/v4/policies', { headers: ADMIN_KEY, json: { name: 'listed-later' } })
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: ADMIN_KEY })
    expect(answer.body.policies).toContainEqual(expect.objectContaining({ name: 'listed-later' }))
  })

  it('answers 409 LIMIT_REACHED in its envelope once the policies kept reach 16 MiB, and keeps the ones it had', async () => {
    await withSimulator({}, async (url) => {
      const blob = 'x'.repeat(1_000_000)
      const statuses: number[] = []
      let last: Awaited<ReturnType<typeof send>> | undefined
      for (let index = 0; index < 17; index++) {
        last = await send(url, 'POST', '/v4/policies', { headers: ADMIN_KEY, json: { name: `big-${index}`, blob } })
        statuses.push(last.status)
      }
      expect(statuses).toEqual([...Array<number>(16).fill(201), 409])
      expect(last?.body.error).toMatchObject({ code: 'LIMIT_REACHED' })
      expect(last?.body.meta).toMatchObject({ requestId: expect.any(String) })
      const listed = await send(url, 'GET', '/v4/policies', { headers: ADMIN_KEY })
      expect(listed.body.policies).toHaveLength(17)
    })
  })

  it('answers 403 FORBIDDEN when a session token without the admin role creates a policy', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/policies', { headers: BOB, json: { name: 'bob-policy' } })
    expect(answer.status).toBe(403)
    expect(answer.body.error?.code).toBe('FORBIDDEN')
  })

  // Contract part 3: an active service-account token's admin call succeeds; rule 4 forbids only a session token.
  it('lets an active service key create a policy whatever its roles', async () => {
    await withSimulator({ serviceKeys: { key_reader: { subject: 'sa_reader', roles: [] } } }, async (url) => {
      const answer = await send(url, 'POST', '/v4/policies', { headers: { 'x-service-api-key': 'key_reader' }, json: { name: 'by-a-reader-key' } })
      expect(answer.status).toBe(201)
      expect(answer.body.policy).toMatchObject({ name: 'by-a-reader-key' })
    })
  })

  it('answers 401 AUTH_INVALID when an unknown key_* calls an admin endpoint', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: { 'x-service-api-key': 'key_unknown' } })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
  })

  it('answers 401 INVALID_CREDENTIAL_TYPE when an sa_* identifier is sent as x-service-api-key', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: { 'x-service-api-key': 'sa_demo' } })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('INVALID_CREDENTIAL_TYPE')
  })

  it('answers 401 AUTH_INVALID when x-service-api-key carries neither key_* nor sa_*', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: { 'x-service-api-key': 'demo-token-alice' } })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
  })

  it('answers 401 AUTH_INVALID when an admin endpoint gets no credential', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies')
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
  })

  it('answers 401 AUTH_INVALID when a key_* is sent as a bearer token to an admin endpoint', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: { authorization: 'Bearer key_demo_admin' } })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
  })

  it('answers 401 INVALID_CREDENTIAL_TYPE when an sa_* identifier is the bearer token on an admin endpoint', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: { authorization: 'Bearer sa_demo' } })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('INVALID_CREDENTIAL_TYPE')
  })

  it('answers 401 AUTH_INVALID when an unknown session token calls an admin endpoint', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: { authorization: 'Bearer nobody' } })
    expect(answer.status).toBe(401)
    expect(answer.body.error?.code).toBe('AUTH_INVALID')
  })

  it('answers 400 CREDENTIALS_AMBIGUOUS when both x-service-api-key and Authorization are sent', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: { ...ADMIN_KEY, ...ALICE } })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('CREDENTIALS_AMBIGUOUS')
  })

  it('answers 401 INVALID_CREDENTIAL_TYPE to an sa_* id sent as x-service-api-key on an admin route, even beside a bearer token (contract 5, rule 3)', async () => {
    for (const headers of [{ 'x-service-api-key': 'sa_demo' }, { ...ALICE, 'x-service-api-key': 'sa_demo' }]) {
      const answer = await send(baseUrl, 'GET', '/v4/policies', { headers })
      expect(answer.status).toBe(401)
      expect(answer.body.error?.code).toBe('INVALID_CREDENTIAL_TYPE')
    }
  })

  it('answers 401 INVALID_CREDENTIAL_TYPE to an sa_* id sent as x-service-api-key on a runtime route, even beside a valid bearer token', async () => {
    for (const headers of [{ 'x-service-api-key': 'sa_demo' }, { ...ALICE, 'x-service-api-key': 'sa_demo' }]) {
      const answer = await send(baseUrl, 'POST', '/v4/execute', { headers, json: { input: 1 } })
      expect(answer.status).toBe(401)
      expect(answer.body.error?.code).toBe('INVALID_CREDENTIAL_TYPE')
    }
  })

  // Node keeps only the first Authorization line and joins repeated x-service-api-key lines, and
  // native passthrough forwards every copy (SPEC 7): each line sent must be judged.
  it('judges every line of a repeated credential header, not only the first', async () => {
    const runtimeSecondSa = await sendLines(baseUrl, '/v4/execute', { headers: { ...ALICE, 'x-service-api-key': ['key_demo_admin', 'sa_demo'] }, json: { input: 1 } })
    expect([runtimeSecondSa.status, runtimeSecondSa.json.error.code]).toEqual([401, 'INVALID_CREDENTIAL_TYPE'])
    const runtimeTwoTokens = await sendLines(baseUrl, '/v4/execute', { headers: { authorization: ['Bearer demo-token-bob', 'Bearer demo-token-alice'] }, json: { input: 1 } })
    expect([runtimeTwoTokens.status, runtimeTwoTokens.json.error.code]).toEqual([400, 'CREDENTIALS_AMBIGUOUS'])
    const adminTwoTokens = await sendLines(baseUrl, '/v4/policies', { headers: { authorization: ['Bearer demo-token-bob', 'Bearer demo-token-alice'] }, json: { name: 'p' } })
    expect([adminTwoTokens.status, adminTwoTokens.json.error.code]).toEqual([400, 'CREDENTIALS_AMBIGUOUS'])
    const adminTwoKeys = await sendLines(baseUrl, '/v4/policies', { headers: { 'x-service-api-key': ['key_demo_admin', 'key_demo_admin'] } })
    expect([adminTwoKeys.status, adminTwoKeys.json.error.code]).toEqual([400, 'CREDENTIALS_AMBIGUOUS'])
    const adminSecondSa = await sendLines(baseUrl, '/v4/policies', { headers: { 'x-service-api-key': ['key_demo_admin', 'sa_demo'] } })
    expect([adminSecondSa.status, adminSecondSa.json.error.code]).toEqual([401, 'INVALID_CREDENTIAL_TYPE'])
  })

  it('answers 401 AUTH_REVOKED when a key revoked with revokeKey lists policies', async () => {
    await withSimulator({}, async (url, sim) => {
      sim.revokeKey('key_demo_admin')
      const answer = await send(url, 'GET', '/v4/policies', { headers: ADMIN_KEY })
      expect(answer.status).toBe(401)
      expect(answer.body.error?.code).toBe('AUTH_REVOKED')
    })
  })

  it('answers 400 INVALID_REQUEST when a policy is created without a name', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/policies', { headers: ADMIN_KEY, json: { level: 1 } })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })
})

describe('simulator sessions', () => {
  it('answers 201 with a ses_ id and exactly the defaults given', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/sessions.start', { headers: ALICE, json: { policy: 'strict', risk: 'high', extra: 1 } })
    expect(answer.status).toBe(201)
    expect(answer.body.sessionId).toMatch(/^ses_/)
    expect(answer.body.defaults).toEqual({ policy: 'strict', risk: 'high' })
    expect(answer.body.meta.sessionId).toBe(answer.body.sessionId)
  })

  it('starts a session with no defaults when the JSON body is empty', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/sessions.start', { headers: { ...ALICE, 'content-type': 'application/json' }, raw: '' })
    expect(answer.status).toBe(201)
    expect(answer.body.defaults).toEqual({})
  })

  it('starts a session when there is no body and no content-type', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/sessions.start', { headers: ALICE })
    expect(answer.status).toBe(201)
    expect(answer.body.defaults).toEqual({})
  })

  it('answers 400 INVALID_REQUEST when a session default is not a string', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/sessions.start', { headers: ALICE, json: { route: 7 } })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })

  it('counts every started session in sessionCount', async () => {
    const before = simulator.sessionCount()
    await startSession(ALICE)
    await startSession(BOB)
    expect(simulator.sessionCount()).toBe(before + 2)
  })

  it('inherits the persisted session defaults in executions', async () => {
    const sessionId = await startSession(ALICE, { policy: 'strict', route: 'fast', risk: 'high' })
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 'hi' } })
    expect(answer.status).toBe(200)
    expect(answer.body.effective).toEqual({ policy: 'strict', route: 'fast', risk: 'high' })
  })

  it('lets per-call policy and route override the session defaults', async () => {
    const sessionId = await startSession(ALICE, { policy: 'strict', route: 'fast', risk: 'high' })
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1, policy: 'lenient', route: 'slow' } })
    expect(answer.body.effective).toEqual({ policy: 'lenient', route: 'slow', risk: 'high' })
  })

  it('keeps the session risk when an execution sends its own risk', async () => {
    const sessionId = await startSession(ALICE, { risk: 'high' })
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1, risk: 'low' } })
    expect(answer.body.effective?.risk).toBe('high')
  })

  it('applies backend defaults where the session has none', async () => {
    const sessionId = await startSession(ALICE, { route: 'fast' })
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1 } })
    expect(answer.body.effective).toEqual({ policy: 'default', route: 'fast', risk: 'low' })
  })

  it('echoes the input, null included, as output.echo', async () => {
    const sessionId = await startSession(ALICE)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: null } })
    expect(answer.status).toBe(200)
    expect(answer.body.output).toEqual({ echo: null })
  })

  it('accepts and ignores unknown fields in an execution body', async () => {
    const sessionId = await startSession(ALICE)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1, trace: true } })
    expect(answer.status).toBe(200)
    expect(answer.body.output).toEqual({ echo: 1 })
  })

  it('answers 400 INVALID_REQUEST when an execution has no input', async () => {
    const sessionId = await startSession(ALICE)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { policy: 'strict' } })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })

  it('answers 400 INVALID_REQUEST when an execution has no body at all', async () => {
    const sessionId = await startSession(ALICE)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })

  it('answers 400 INVALID_REQUEST when a per-call policy is not a string', async () => {
    const sessionId = await startSession(ALICE)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1, policy: null } })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })

  it('answers 404 SESSION_NOT_FOUND for an unknown session', async () => {
    const answer = await send(baseUrl, 'POST', executionPath('ses_unknown'), { headers: ALICE, json: { input: 1 } })
    expect(answer.status).toBe(404)
    expect(answer.body.error?.code).toBe('SESSION_NOT_FOUND')
  })

  it('answers 404 SESSION_NOT_FOUND when another identity executes in the session', async () => {
    const sessionId = await startSession(ALICE)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: BOB, json: { input: 1 } })
    expect(answer.status).toBe(404)
    expect(answer.body.error?.code).toBe('SESSION_NOT_FOUND')
    expect(JSON.stringify(answer.body)).not.toContain('user_alice')
  })

  it('answers 410 SESSION_EXPIRED after expireSession', async () => {
    const sessionId = await startSession(ALICE)
    simulator.expireSession(sessionId)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1 } })
    expect(answer.status).toBe(410)
    expect(answer.body.error?.code).toBe('SESSION_EXPIRED')
  })

  it('answers 404 SESSION_NOT_FOUND, not 410, when another identity uses an expired session', async () => {
    const sessionId = await startSession(ALICE)
    simulator.expireSession(sessionId)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: BOB, json: { input: 1 } })
    expect(answer.status).toBe(404)
    expect(answer.body.error?.code).toBe('SESSION_NOT_FOUND')
  })

  it('answers 410 SESSION_EXPIRED once a session is older than sessionTtlMs', async () => {
    await withSimulator({ sessionTtlMs: 20 }, async (url) => {
      const started = await send(url, 'POST', '/v4/sessions.start', { headers: ALICE, json: {} })
      await sleep(60)
      const answer = await send(url, 'POST', executionPath(started.body.sessionId ?? ''), { headers: ALICE, json: { input: 1 } })
      expect(answer.status).toBe(410)
      expect(answer.body.error?.code).toBe('SESSION_EXPIRED')
    })
  })
})

describe('simulator one-liner execute', () => {
  it('answers 200 with backend defaults when nothing is given', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: BOB, json: { input: { a: 1 } } })
    expect(answer.status).toBe(200)
    expect(answer.body.output).toEqual({ echo: { a: 1 } })
    expect(answer.body.effective).toEqual({ policy: 'default', route: 'standard', risk: 'low' })
  })

  it('uses the given policy, route and risk', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: BOB, json: { input: 1, policy: 'p', route: 'r', risk: 'high' } })
    expect(answer.body.effective).toEqual({ policy: 'p', route: 'r', risk: 'high' })
  })

  it('uses the backendDefaults option', async () => {
    await withSimulator({ backendDefaults: { policy: 'bp', route: 'br', risk: 'medium' } }, async (url) => {
      const answer = await send(url, 'POST', '/v4/execute', { headers: BOB, json: { input: 1 } })
      expect(answer.body.effective).toEqual({ policy: 'bp', route: 'br', risk: 'medium' })
    })
  })

  it('creates no session', async () => {
    const before = simulator.sessionCount()
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: BOB, json: { input: 1 } })
    expect(simulator.sessionCount()).toBe(before)
    expect(answer.body.meta.sessionId).toBeUndefined()
  })

  it('answers 400 INVALID_REQUEST when risk is not a string', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: BOB, json: { input: 1, risk: 3 } })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })

  it('answers 400 INVALID_REQUEST when the body is not JSON', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { ...BOB, 'content-type': 'text/plain' }, raw: 'input=1' })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })

  it('answers 400 INVALID_REQUEST when a JSON body is malformed', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { ...BOB, 'content-type': 'application/json' }, raw: '{"input":' })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })

  it('answers 400 INVALID_REQUEST when the JSON body is not an object', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: BOB, json: [1, 2] })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })

  it('parses a JSON body sent with a charset parameter', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { ...BOB, 'content-type': 'application/json; charset=utf-8' }, json: { input: 1 } })
    expect(answer.status).toBe(200)
  })

  it('parses a structured +json media type as JSON', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { ...BOB, 'content-type': 'application/vnd.demo+json' }, json: { input: 1 } })
    expect(answer.status).toBe(200)
  })
})

describe('simulator meta envelope (contract part 2)', () => {
  it('carries requestId, sessionId, executionId, lineageId and timingMs.total on a session execution', async () => {
    const sessionId = await startSession(ALICE)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1 } })
    expect(answer.body.meta).toEqual({
      requestId: expect.stringMatching(/^req_/),
      sessionId,
      executionId: expect.stringMatching(/^exe_/),
      lineageId: expect.stringMatching(/^lin_/),
      timingMs: { total: expect.any(Number) }
    })
    expect(answer.body.meta.timingMs.total).toBeGreaterThanOrEqual(0)
  })

  it('gives the executions of one session the same lineageId and distinct executionIds', async () => {
    const sessionId = await startSession(ALICE)
    const first = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1 } })
    const second = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 2 } })
    expect(second.body.meta.lineageId).toBe(first.body.meta.lineageId)
    expect(second.body.meta.executionId).not.toBe(first.body.meta.executionId)
  })

  it('carries requestId, executionId, lineageId and timingMs.total on a one-liner execution', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: BOB, json: { input: 1 } })
    expect(answer.body.meta).toEqual({
      requestId: expect.stringMatching(/^req_/),
      executionId: expect.stringMatching(/^exe_/),
      lineageId: expect.stringMatching(/^lin_/),
      timingMs: { total: expect.any(Number) }
    })
  })

  it('echoes the incoming x-request-id in meta.requestId', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { ...BOB, 'x-request-id': 'caller-req-42' }, json: { input: 1 } })
    expect(answer.body.meta.requestId).toBe('caller-req-42')
  })

  it('echoes the incoming x-request-id in the meta of an error', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { headers: { 'x-request-id': 'caller-req-43' }, json: { input: 1 } })
    expect(answer.status).toBe(401)
    expect(answer.body.meta.requestId).toBe('caller-req-43')
  })

  it('answers errors as { error: { code, message }, meta }', async () => {
    const answer = await send(baseUrl, 'POST', '/v4/execute', { json: { input: 1 } })
    expect(answer.body).toEqual({
      error: { code: 'AUTH_INVALID', message: expect.any(String) },
      meta: { requestId: expect.stringMatching(/^req_/), timingMs: { total: expect.any(Number) } }
    })
  })

  it('carries meta on policies answers', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/policies', { headers: ADMIN_KEY })
    expect(answer.body.meta).toEqual({ requestId: expect.stringMatching(/^req_/), timingMs: { total: expect.any(Number) } })
  })

  it('answers 404 NOT_FOUND with meta for an unknown route', async () => {
    const answer = await send(baseUrl, 'GET', '/v4/unknown', { headers: ALICE })
    expect(answer.status).toBe(404)
    expect(answer.body.error?.code).toBe('NOT_FOUND')
    expect(answer.body.meta.requestId).toMatch(/^req_/)
  })
})

describe('simulator answers it cannot route, in its own shape (SPEC 11)', () => {
  const envelope = (code: string) => ({ error: { code, message: expect.any(String) }, meta: { requestId: expect.stringMatching(/^req_/), timingMs: { total: expect.any(Number) } } })

  it('answers headers over the parser limit 431 and broken framing 400 as { error, meta }, not fastify\'s shape', async () => {
    const big = await rawExchange(baseUrl, buildRawRequest('POST /v4/execute HTTP/1.1', [['host', 'sim'], ['x-padding', 'a'.repeat(20_000)], ['content-length', '0']]))
    expect(big.response?.status).toBe(431)
    expect(JSON.parse(big.response?.text ?? '')).toEqual(envelope('REQUEST_HEADERS_TOO_LARGE'))
    const broken = await rawExchange(baseUrl, buildRawRequest('POST /v4/execute HTTP/1.1', [['host', 'sim'], ['content-length', '2'], ['transfer-encoding', 'chunked']], '{}'))
    expect(broken.response?.status).toBe(400)
    expect(JSON.parse(broken.response?.text ?? '')).toEqual(envelope('INVALID_REQUEST'))
  })

  it('answers a request that arrives on a busy connection while it closes 503 SHUTTING_DOWN as { error, meta }', async () => {
    const sim = createSimulator()
    const { port } = new URL(await sim.listen())
    const socket = connect(Number(port), '127.0.0.1')
    await once(socket, 'connect')
    const received: Buffer[] = []
    socket.on('data', (chunk: Buffer) => received.push(chunk))
    const ended = once(socket, 'close')
    const body = JSON.stringify({ input: 1 })
    // The first request's headers arrive before close, its body after; the second comes behind it.
    socket.write(buildRawRequest('POST /v4/execute HTTP/1.1', [['host', 'sim'], ['authorization', 'Bearer demo-token-alice'], ['content-type', 'application/json'], ['content-length', String(body.length)]]))
    await sleep(50)
    const closed = sim.close()
    await sleep(20)
    socket.write(Buffer.concat([Buffer.from(body), buildRawRequest('POST /v4/execute HTTP/1.1', [['host', 'sim'], ['authorization', 'Bearer demo-token-alice'], ['content-type', 'application/json'], ['content-length', String(body.length)]], body)]))
    await ended
    await closed
    const bytes = Buffer.concat(received)
    const first = parseRawResponse(bytes, true, 'POST')
    expect(first?.status).toBe(200)
    const second = parseRawResponse(bytes.subarray(bytes.indexOf('HTTP/1.1', 1)), true, 'POST')
    expect(second?.status).toBe(503)
    expect(second?.headers.connection).toBe('close')
    expect(JSON.parse(second?.text ?? '')).toEqual(envelope('SHUTTING_DOWN'))
  })
})

describe('simulator HTTP controls', () => {
  it('answers 204 to POST /_simulator/keys/revoke and then 401 AUTH_REVOKED for that key', async () => {
    await withSimulator({}, async (url) => {
      const revoked = await send(url, 'POST', '/_simulator/keys/revoke', { json: { key: 'key_demo_admin' } })
      expect(revoked.status).toBe(204)
      const answer = await send(url, 'GET', '/v4/policies', { headers: ADMIN_KEY })
      expect(answer.status).toBe(401)
      expect(answer.body.error?.code).toBe('AUTH_REVOKED')
    })
  })

  it('answers 400 INVALID_REQUEST when POST /_simulator/keys/revoke has no key', async () => {
    const answer = await send(baseUrl, 'POST', '/_simulator/keys/revoke', { json: {} })
    expect(answer.status).toBe(400)
    expect(answer.body.error?.code).toBe('INVALID_REQUEST')
  })

  it('answers 204 to POST /_simulator/sessions/:id/expire and then 410 SESSION_EXPIRED', async () => {
    const sessionId = await startSession(ALICE)
    const expired = await send(baseUrl, 'POST', `/_simulator/sessions/${sessionId}/expire`)
    expect(expired.status).toBe(204)
    const answer = await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1 } })
    expect(answer.status).toBe(410)
    expect(answer.body.error?.code).toBe('SESSION_EXPIRED')
  })
})

describe('simulator call recording', () => {
  it('records a rejected call with its headers and parsed body', async () => {
    simulator.resetCalls()
    await send(baseUrl, 'POST', '/v4/execute', { headers: { authorization: 'Bearer key_demo_admin' }, json: { input: 'x' } })
    expect(simulator.calls).toHaveLength(1)
    expect(simulator.calls[0]).toMatchObject({ method: 'POST', path: '/v4/execute', body: { input: 'x' } })
    expect(simulator.calls[0]?.headers.authorization).toBe('Bearer key_demo_admin')
  })

  it('records the query string in url but not in path', async () => {
    simulator.resetCalls()
    await send(baseUrl, 'GET', '/v4/policies?limit=2', { headers: ADMIN_KEY })
    expect(simulator.calls[0]).toMatchObject({ path: '/v4/policies', url: '/v4/policies?limit=2' })
  })

  it('records a body that is not JSON as its raw text', async () => {
    simulator.resetCalls()
    await send(baseUrl, 'POST', '/v4/execute', { headers: { ...BOB, 'content-type': 'text/plain' }, raw: 'plain words' })
    expect(simulator.calls[0]?.body).toBe('plain words')
  })

  it('records calls in the order received', async () => {
    simulator.resetCalls()
    await send(baseUrl, 'GET', '/v4/policies', { headers: ADMIN_KEY })
    await send(baseUrl, 'POST', '/v4/execute', { headers: BOB, json: { input: 1 } })
    expect(simulator.calls.map((call) => `${call.method} ${call.path}`)).toEqual(['GET /v4/policies', 'POST /v4/execute'])
  })

  it('counts calls by method and exact path or pattern', async () => {
    simulator.resetCalls()
    const sessionId = await startSession(ALICE)
    await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 1 } })
    await send(baseUrl, 'POST', executionPath(sessionId), { headers: ALICE, json: { input: 2 } })
    expect(simulator.countCalls('POST', '/v4/sessions.start')).toBe(1)
    expect(simulator.countCalls('post', /\/executions\.execute$/)).toBe(2)
    expect(simulator.countCalls('GET', '/v4/sessions.start')).toBe(0)
  })

  it('empties the same calls array on resetCalls', async () => {
    const calls = simulator.calls
    await send(baseUrl, 'GET', '/v4/policies', { headers: ADMIN_KEY })
    simulator.resetCalls()
    expect(calls).toHaveLength(0)
    expect(simulator.calls).toBe(calls)
  })
})

describe('simulator options', () => {
  it('documents the demo identities in DEFAULT_SIMULATOR_OPTIONS', () => {
    expect(DEFAULT_SIMULATOR_OPTIONS.sessionTokens).toEqual({
      'demo-token-alice': { subject: 'user_alice', roles: ['admin'] },
      'demo-token-bob': { subject: 'user_bob', roles: [] }
    })
    expect(DEFAULT_SIMULATOR_OPTIONS.serviceKeys).toEqual({ key_demo_admin: { subject: 'sa_demo', roles: ['admin'] } })
    expect(DEFAULT_SIMULATOR_OPTIONS.backendDefaults).toEqual({ policy: 'default', route: 'standard', risk: 'low' })
    expect(Object.isFrozen(DEFAULT_SIMULATOR_OPTIONS)).toBe(true)
  })

  it('answers a session id longer than fastify\'s default parameter limit 404 SESSION_NOT_FOUND in its own error shape', async () => {
    await withSimulator({}, async (url) => {
      const answer = await send(url, 'POST', `/v4/sessions/ses_${'a'.repeat(300)}/executions.execute`, { headers: ALICE, json: { input: 1 } })
      expect(answer.status).toBe(404)
      expect(answer.body.error?.code).toBe('SESSION_NOT_FOUND')
      expect(typeof answer.body.meta.requestId).toBe('string')
    })
  })

  it('answers a URL it cannot decode 400 INVALID_REQUEST in its own error shape', async () => {
    await withSimulator({}, async (url) => {
      const answer = await send(url, 'POST', '/v4/sessions/%zz/executions.execute', { headers: ALICE, json: { input: 1 } })
      expect(answer.status).toBe(400)
      expect(answer.body.error).toEqual({ code: 'INVALID_REQUEST', message: 'the request URL could not be read' })
      expect(typeof answer.body.meta.timingMs.total).toBe('number')
    })
  })

  it('keeps no request with recordCalls: false (the embedded simulator of a long-running gateway), and still answers', async () => {
    const sim = createSimulator({ recordCalls: false })
    const url = await sim.listen()
    try {
      for (let call = 0; call < 3; call++) {
        expect((await send(url, 'POST', '/v4/execute', { headers: ALICE, json: { input: 'x'.repeat(10_000) } })).status).toBe(200)
      }
      expect(sim.calls).toHaveLength(0)
      expect(sim.countCalls('POST', '/v4/execute')).toBe(0)
    } finally {
      await sim.close()
    }
  })

  it('accepts only the configured session tokens when sessionTokens is given', async () => {
    await withSimulator({ sessionTokens: { 'custom-token': { subject: 'user_c', roles: [] } } }, async (url) => {
      const custom = await send(url, 'POST', '/v4/execute', { headers: { authorization: 'Bearer custom-token' }, json: { input: 1 } })
      const demo = await send(url, 'POST', '/v4/execute', { headers: ALICE, json: { input: 1 } })
      expect(custom.status).toBe(200)
      expect(demo.status).toBe(401)
    })
  })

  it('refuses a session token that the auth rules could never accept', () => {
    expect(() => createSimulator({ sessionTokens: { key_oops: { subject: 'user_x', roles: [] } } })).toThrow(TypeError)
  })

  it('closes more than once without failing', async () => {
    const sim = createSimulator()
    await sim.listen()
    await sim.close()
    await expect(sim.close()).resolves.toBeUndefined()
  })
})
