import { gzipSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { LEGACY_V1_ROUTES } from '../../src/config/schema.js'
import { send, type Answer } from '../helpers/http.js'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { useSimulatorGateway } from '../helpers/simulator-gateway.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }
const START_PATH = '/v4/sessions.start'
const EXECUTION_PATH = /^\/v4\/sessions\/[^/]+\/executions\.execute$/

const DEPRECATION = { date: '2025-01-01T00:00:00Z', sunset: '2026-06-30T00:00:00Z', link: 'https://example.com/v4-migration' }
const DEPRECATION_HEADERS = {
  deprecation: '@1735689600',
  sunset: 'Tue, 30 Jun 2026 00:00:00 GMT',
  // SPEC 13: then the successor-version, the V4 path the route maps to.
  link: expect.stringMatching(/^<https:\/\/example\.com\/v4-migration>; rel="deprecation", <\/v4\/[^>]+>; rel="successor-version"$/)
}

/** Tenants that differ in one `legacy` setting each, all on one upstream. */
function tenantsOn(upstreamUrl: string): Record<string, unknown> {
  const upstream = { staging: upstreamUrl }
  return {
    acme: { upstream },
    custom: {
      upstream,
      legacy: {
        routes: [
          { method: 'POST', path: '/v0/jobs', action: 'execute' },
          { method: 'POST', path: '/v0/sessions/run', action: 'session-execute', stateKey: 'header:x-client-state' },
          { method: 'POST', path: '/v0/clients/run', action: 'session-execute', stateKey: 'body:/client/id' }
        ]
      }
    },
    remap: { upstream, legacy: { fields: { input: '/payload/data', policy: '/governance/policy' } } },
    restate: { upstream, legacy: { fields: { stateId: '/sid', state: '/st' } } },
    inner: { upstream, legacy: { fields: { stateId: '/state/id' } } },
    dropper: { upstream, legacy: { unknownFields: 'drop' } },
    copies: {
      upstream,
      legacy: {
        responseFields: [
          { from: '/output', to: '/result' },
          { from: '/meta/sessionId', to: '/session_id' }
        ]
      }
    },
    deprecated: {
      upstream,
      legacy: {
        routes: [...LEGACY_V1_ROUTES, { method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }],
        deprecation: DEPRECATION
      }
    },
    dateonly: { upstream, legacy: { deprecation: { date: '2025-03-01T12:00:00+02:00' } } }
  }
}

function as(tenant: string, extra: Record<string, string> = {}): Record<string, string> {
  return { ...ALICE, 'x-tenant-id': tenant, ...extra }
}

describe('legacy translation on the simulator', () => {
  const { sim, gw } = useSimulatorGateway((url) => ({ tenants: tenantsOn(url) }))

  function bodiesAt(path: string | RegExp): unknown[] {
    return sim.simulator.calls.filter((call) => (typeof path === 'string' ? call.path === path : path.test(call.path))).map((call) => call.body)
  }

  function post(path: string, json: unknown, headers: Record<string, string>): Promise<Answer> {
    return send(gw.url, path, { headers, json })
  }

  describe('per-tenant route tables (SPEC 4)', () => {
    it('sends POST /v0/jobs of a tenant with its own route table to POST /v4/execute', async () => {
      const answer = await post('/v0/jobs', { input: { job: 1 }, policy: 'strict' }, as('custom'))
      expect(answer.status).toBe(200)
      expect(sim.simulator.calls.map((call) => `${call.method} ${call.path}`)).toEqual(['POST /v4/execute'])
      expect(bodiesAt('/v4/execute')).toEqual([{ input: { job: 1 }, policy: 'strict' }])
    })

    it('answers 404 ROUTE_NOT_FOUND for a legacy-v1 path on a tenant whose own table replaces it', async () => {
      const answer = await post('/v1/headless/runs', { input: 1 }, as('custom'))
      expect(answer.status).toBe(404)
      expect(answer.json.error.code).toBe('ROUTE_NOT_FOUND')
      expect(sim.simulator.calls).toHaveLength(0)
    })

    it('answers 404 ROUTE_NOT_FOUND for another tenant custom route on a tenant with the legacy-v1 table', async () => {
      const answer = await post('/v0/jobs', { input: 1 }, as('acme'))
      expect(answer.status).toBe(404)
      expect(answer.json.error.code).toBe('ROUTE_NOT_FOUND')
      expect(sim.simulator.calls).toHaveLength(0)
    })

    it('keys sessions by the request header named in a header: state key', async () => {
      const first = await post('/v0/sessions/run', { input: 1 }, as('custom', { 'x-client-state': 'client-a' }))
      const again = await post('/v0/sessions/run', { input: 2 }, as('custom', { 'x-client-state': 'client-a' }))
      const other = await post('/v0/sessions/run', { input: 3 }, as('custom', { 'x-client-state': 'client-b' }))
      expect([first.status, again.status, other.status]).toEqual([200, 200, 200])
      expect(again.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
      expect(other.headers['x-v4-session-id']).not.toBe(first.headers['x-v4-session-id'])
      expect(sim.simulator.countCalls('POST', START_PATH)).toBe(2)
    })

    it('ignores a body stateId on a route keyed by a header', async () => {
      const first = await post('/v0/sessions/run', { input: 1, stateId: 'one' }, as('custom', { 'x-client-state': 'client-c' }))
      const second = await post('/v0/sessions/run', { input: 1, stateId: 'two' }, as('custom', { 'x-client-state': 'client-c' }))
      expect(second.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
    })

    it('keys sessions by the body member named in a body: state key', async () => {
      const first = await post('/v0/clients/run', { input: 1, client: { id: 'c-1' } }, as('custom'))
      const again = await post('/v0/clients/run', { input: 2, client: { id: 'c-1' } }, as('custom'))
      const other = await post('/v0/clients/run', { input: 3, client: { id: 'c-2' } }, as('custom'))
      expect([first.status, again.status, other.status]).toEqual([200, 200, 200])
      expect(again.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
      expect(other.headers['x-v4-session-id']).not.toBe(first.headers['x-v4-session-id'])
      expect(sim.simulator.countCalls('POST', START_PATH)).toBe(2)
    })

    it('consumes the body: state key member instead of carrying it into the execution', async () => {
      await post('/v0/clients/run', { input: 1, client: { id: 'c-3' }, trace: 't' }, as('custom'))
      expect(bodiesAt(EXECUTION_PATH)).toEqual([{ input: 1, trace: 't' }])
      expect(bodiesAt(START_PATH)).toEqual([{}])
    })

    it('answers 400 INVALID_REQUEST naming the body: state key pointer when it holds an object', async () => {
      const answer = await post('/v0/clients/run', { input: 1, client: { id: { nested: true } } }, as('custom'))
      expect(answer.status).toBe(400)
      expect(answer.json.error.code).toBe('INVALID_REQUEST')
      expect(answer.json.error.details).toEqual([expect.objectContaining({ pointer: '/client/id' })])
      expect(sim.simulator.calls).toHaveLength(0)
    })
  })

  describe('legacy.fields remapping (SPEC 4)', () => {
    it('reads input and policy at the remapped pointers and sends them under the V4 names', async () => {
      const answer = await post('/v1/headless/runs', { payload: { data: { q: 1 } }, governance: { policy: 'strict' } }, as('remap'))
      expect(answer.status).toBe(200)
      expect(bodiesAt('/v4/execute')).toEqual([{ input: { q: 1 }, policy: 'strict' }])
      expect(answer.json.effective.policy).toBe('strict')
    })

    it('carries what the remapped pointers leave of their members into the V4 body (SPEC 4: nothing dropped silently)', async () => {
      const answer = await post('/v1/headless/runs', { payload: { data: { q: 1 }, locale: 'de' }, governance: { policy: 'strict' }, trace: 't-1' }, as('remap'))
      expect(answer.status).toBe(200)
      expect(bodiesAt('/v4/execute')).toEqual([{ payload: { locale: 'de' }, trace: 't-1', input: { q: 1 }, policy: 'strict' }])
    })

    it('answers 400 INVALID_REQUEST whose details name the remapped input pointer when input is missing', async () => {
      const answer = await post('/v1/headless/runs', { input: 'default-name', governance: { policy: 'strict' } }, as('remap'))
      expect(answer.status).toBe(400)
      expect(answer.json.error.code).toBe('INVALID_REQUEST')
      expect(answer.json.error.details).toEqual([expect.objectContaining({ pointer: '/payload/data' })])
      expect(sim.simulator.calls).toHaveLength(0)
    })

    it('answers 400 INVALID_REQUEST whose details name the remapped policy pointer when it is not a string', async () => {
      const answer = await post('/v1/headless/runs', { payload: { data: 1 }, governance: { policy: 42 } }, as('remap'))
      expect(answer.status).toBe(400)
      expect(answer.json.error.details).toEqual([expect.objectContaining({ pointer: '/governance/policy' })])
    })

    it('keeps session-execute working on the remapped fields', async () => {
      const answer = await post('/v1/runs/invoke', { payload: { data: 'x' }, governance: { policy: 'loose' }, state: { route: 'fast' }, stateId: 'remapped' }, as('remap'))
      expect(answer.status).toBe(200)
      expect(bodiesAt(START_PATH)).toEqual([{ route: 'fast' }])
      expect(bodiesAt(EXECUTION_PATH)).toEqual([{ input: 'x', policy: 'loose' }])
    })
  })

  describe('legacy.fields remapping of stateId (SPEC 4)', () => {
    it('keys the session by the remapped stateId and carries a top-level stateId member as the unknown field it is', async () => {
      const first = await post('/v1/runs/invoke', { input: 1, sid: 'k-1', st: { policy: 'strict' }, stateId: 'legacy-thing', state: { note: 'mine' } }, as('restate'))
      const again = await post('/v1/runs/invoke', { input: 2, sid: 'k-1', st: { policy: 'strict' }, stateId: 'other-thing' }, as('restate'))
      expect([first.status, again.status]).toEqual([200, 200])
      expect(again.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
      expect(bodiesAt(START_PATH)).toEqual([{ policy: 'strict' }])
      expect(bodiesAt(EXECUTION_PATH)).toEqual([
        { stateId: 'legacy-thing', state: { note: 'mine' }, input: 1 },
        { stateId: 'other-thing', input: 2 }
      ])
    })
  })

  describe('a stateId read from inside state (SPEC 4)', () => {
    it('keys the session by it and starts the session with the rest of state as its defaults', async () => {
      const first = await post('/v1/runs/invoke', { input: 1, state: { id: 'c-1', policy: 'strict' } }, as('inner'))
      const again = await post('/v1/runs/invoke', { input: 2, state: { id: 'c-1', policy: 'strict' } }, as('inner'))
      const other = await post('/v1/runs/invoke', { input: 3, state: { id: 'c-2', policy: 'strict' } }, as('inner'))
      expect([first.status, again.status, other.status]).toEqual([200, 200, 200])
      expect(again.headers['x-v4-session-id']).toBe(first.headers['x-v4-session-id'])
      expect(other.headers['x-v4-session-id']).not.toBe(first.headers['x-v4-session-id'])
      expect(bodiesAt(START_PATH)).toEqual([{ policy: 'strict' }, { policy: 'strict' }])
    })
  })

  describe('legacy.unknownFields (SPEC 4)', () => {
    it('carries unknown top-level fields into POST /v4/execute with unknownFields keep (the default)', async () => {
      await post('/v1/headless/runs', { input: 1, trace: 'abc', extra: { nested: [1, 2] } }, as('acme'))
      expect(bodiesAt('/v4/execute')).toEqual([{ input: 1, trace: 'abc', extra: { nested: [1, 2] } }])
    })

    it('carries unknown fields into the V4 execution body but never into sessions.start with unknownFields keep', async () => {
      await post('/v1/runs/invoke', { input: 1, stateId: 'keep-unknown', state: { policy: 'p' }, trace: 'abc' }, as('acme'))
      expect(bodiesAt(START_PATH)).toEqual([{ policy: 'p' }])
      expect(bodiesAt(EXECUTION_PATH)).toEqual([{ input: 1, trace: 'abc' }])
    })

    it('drops unknown fields from POST /v4/execute with unknownFields drop', async () => {
      await post('/v1/headless/runs', { input: 1, trace: 'abc' }, as('dropper'))
      expect(bodiesAt('/v4/execute')).toEqual([{ input: 1 }])
    })

    it('drops unknown fields from the V4 execution body with unknownFields drop', async () => {
      await post('/v1/runs/invoke', { input: 1, stateId: 'drop-unknown', trace: 'abc' }, as('dropper'))
      expect(bodiesAt(START_PATH)).toEqual([{}])
      expect(bodiesAt(EXECUTION_PATH)).toEqual([{ input: 1 }])
    })
  })

  describe('legacy.responseFields (SPEC 6)', () => {
    it('copies /output to /result on an execute answer', async () => {
      const answer = await post('/v1/headless/runs', { input: { q: 1 } }, as('copies'))
      expect(answer.json.result).toEqual({ echo: { q: 1 } })
      expect(answer.json.output).toEqual({ echo: { q: 1 } })
    })

    it('copies /meta/sessionId to /session_id on a session-execute answer', async () => {
      const answer = await post('/v1/runs/invoke', { input: 1, stateId: 'copied-session' }, as('copies'))
      expect(answer.status).toBe(200)
      expect(answer.json.session_id).toBe(answer.headers['x-v4-session-id'])
    })

    it('creates no copy when the source field is missing', async () => {
      const answer = await post('/v1/headless/runs', { input: 1 }, as('copies'))
      expect(answer.json).not.toHaveProperty('session_id')
    })

    it('adds no copies for a tenant without responseFields', async () => {
      const answer = await post('/v1/headless/runs', { input: 1 }, as('acme'))
      expect(answer.json).not.toHaveProperty('result')
    })
  })

  describe('legacy.deprecation (SPEC 6)', () => {
    it('adds Deprecation, Sunset and Link to a legacy answer', async () => {
      const answer = await post('/v1/headless/runs', { input: 1 }, as('deprecated'))
      expect(answer.status).toBe(200)
      expect(answer.headers).toMatchObject(DEPRECATION_HEADERS)
    })

    it('adds them to a session-execute answer', async () => {
      const answer = await post('/v1/runs/invoke', { input: 1, stateId: 'deprecated-session' }, as('deprecated'))
      expect(answer.status).toBe(200)
      expect(answer.headers).toMatchObject(DEPRECATION_HEADERS)
    })

    it('adds them to a gateway error on a legacy route (401 AUTH_INVALID)', async () => {
      const answer = await post('/v1/headless/runs', { input: 1 }, { 'x-tenant-id': 'deprecated' })
      expect(answer.status).toBe(401)
      expect(answer.json.error.code).toBe('AUTH_INVALID')
      expect(answer.headers).toMatchObject(DEPRECATION_HEADERS)
    })

    it('adds them to a gateway error on a legacy route (415 UNSUPPORTED_MEDIA_TYPE)', async () => {
      const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...as('deprecated'), 'content-type': 'text/plain' }, body: 'input=1' })
      expect(answer.status).toBe(415)
      expect(answer.json.error.code).toBe('UNSUPPORTED_MEDIA_TYPE')
      expect(answer.headers).toMatchObject(DEPRECATION_HEADERS)
    })

    it('adds them to a V4 error passed through on a legacy route', async () => {
      const answer = await post('/v1/headless/runs', { input: 1 }, { authorization: 'Bearer unknown-token', 'x-tenant-id': 'deprecated' })
      expect(answer.status).toBe(401)
      expect(answer.headers).toMatchObject(DEPRECATION_HEADERS)
    })

    it('adds them to the answer of a proxy legacy route', async () => {
      const answer = await send(gw.url, '/v1/policies', { headers: as('deprecated') })
      expect(answer.status).toBe(200)
      expect(sim.simulator.calls.map((call) => `${call.method} ${call.path}`)).toEqual(['GET /v4/policies'])
      expect(answer.headers).toMatchObject(DEPRECATION_HEADERS)
    })

    it('never adds them to a native /v4 answer of the same tenant', async () => {
      const answer = await post('/v4/execute', { input: 1 }, as('deprecated'))
      expect(answer.status).toBe(200)
      expect(answer.headers.deprecation).toBeUndefined()
      expect(answer.headers.sunset).toBeUndefined()
      expect(answer.headers.link).toBeUndefined()
    })

    it('adds none to a tenant without legacy.deprecation', async () => {
      const answer = await post('/v1/headless/runs', { input: 1 }, as('acme'))
      expect(answer.headers.deprecation).toBeUndefined()
      expect(answer.headers.sunset).toBeUndefined()
      expect(answer.headers.link).toBeUndefined()
    })

    it('sends only Deprecation, in unix seconds of a date with an offset, and the successor-version link when sunset and link are not set', async () => {
      const answer = await post('/v1/headless/runs', { input: 1 }, as('dateonly'))
      expect(answer.headers.deprecation).toBe('@1740823200')
      expect(answer.headers.sunset).toBeUndefined()
      expect(answer.headers.link).toBe('</v4/execute>; rel="successor-version"')
    })
  })
})

describe('legacy answers passed through from a recording upstream (SPEC 6)', () => {
  /** The next answer of the upstream to any request. */
  let next: { status: number; headers: Record<string, string>; body: Buffer }
  const upstream = useRecordingUpstream((request, response) => {
    if (request.url === START_PATH) {
      response.writeHead(201, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ sessionId: 'ses_recorded' }))
      return
    }
    response.writeHead(next.status, next.headers)
    response.end(next.body)
  })
  const gw = useGateway(() => testConfig(upstream.url, { tenants: tenantsOn(upstream.url) }))

  async function postRaw(path: string, json: unknown, tenant = 'acme'): Promise<{ status: number; headers: Headers; bytes: Buffer }> {
    const response = await fetch(new URL(path, gw.url), { method: 'POST', headers: { ...as(tenant), 'content-type': 'application/json' }, body: JSON.stringify(json) })
    return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) }
  }

  it('does not pass on a header the upstream names in its Connection header (RFC 9110 7.6.1)', async () => {
    next = { status: 200, headers: { 'content-type': 'application/json', connection: 'x-upstream-hop', 'x-upstream-hop': '1', 'x-end-to-end': '1' }, body: Buffer.from('{"meta":{"requestId":"r","timingMs":{"total":1}}}') }
    const answer = await postRaw('/v1/headless/runs', { input: 1 })
    expect(answer.status).toBe(200)
    expect(answer.headers.get('x-upstream-hop')).toBeNull()
    expect(answer.headers.get('x-end-to-end')).toBe('1')
  })

  it('appends the client address to an incoming x-forwarded-for list on the V4 call, as native traffic does (SPEC 7)', async () => {
    next = { status: 200, headers: { 'content-type': 'application/json' }, body: Buffer.from('{}') }
    const before = upstream.requests.length
    const response = await fetch(new URL('/v1/headless/runs', gw.url), {
      method: 'POST',
      headers: { ...as('acme'), 'content-type': 'application/json', 'x-forwarded-for': '203.0.113.7' },
      body: JSON.stringify({ input: 1 })
    })
    expect(response.status).toBe(200)
    const forwarded = upstream.requests.slice(before).map((request) => request.headers['x-forwarded-for'])
    expect(forwarded).toEqual(['203.0.113.7, 127.0.0.1'])
  })

  it('passes a binary upstream answer byte for byte with its content type', async () => {
    const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x7b, 0x22, 0x80, 0x0a])
    next = { status: 200, headers: { 'content-type': 'application/octet-stream' }, body: bytes }
    const answer = await postRaw('/v1/headless/runs', { input: 1 })
    expect(answer.status).toBe(200)
    expect(answer.headers.get('content-type')).toBe('application/octet-stream')
    expect(answer.bytes.equals(bytes)).toBe(true)
  })

  it('passes a text upstream answer of a session-execute call byte for byte', async () => {
    const bytes = Buffer.from('plain text answer\r\n with ünïcödé\n')
    next = { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: bytes }
    const answer = await postRaw('/v1/runs/invoke', { input: 1, stateId: 'text' })
    expect(answer.status).toBe(200)
    expect(answer.headers.get('x-v4-session-id')).toBe('ses_recorded')
    expect(answer.bytes.equals(bytes)).toBe(true)
  })

  it('passes a broken JSON answer byte for byte', async () => {
    const bytes = Buffer.from('{"output": [1, 2')
    next = { status: 200, headers: { 'content-type': 'application/json' }, body: bytes }
    const answer = await postRaw('/v1/headless/runs', { input: 1 })
    expect(answer.bytes.equals(bytes)).toBe(true)
  })

  it('passes a JSON answer that is not an object byte for byte', async () => {
    const bytes = Buffer.from('[ 1, 2, 3 ]')
    next = { status: 200, headers: { 'content-type': 'application/json' }, body: bytes }
    const answer = await postRaw('/v1/headless/runs', { input: 1 })
    expect(answer.bytes.equals(bytes)).toBe(true)
  })

  it.each([202, 409])('keeps the upstream status %i on an execute answer', async (status) => {
    next = { status, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify({ state: 'as-sent' })) }
    const answer = await postRaw('/v1/headless/runs', { input: 1 })
    expect(answer.status).toBe(status)
    expect(JSON.parse(answer.bytes.toString('utf8'))).toMatchObject({ state: 'as-sent' })
  })

  it('keeps the upstream status 202 on a session-execute answer', async () => {
    next = { status: 202, headers: { 'content-type': 'application/json' }, body: Buffer.from('{"queued":true}') }
    const answer = await postRaw('/v1/runs/invoke', { input: 1, stateId: 'accepted' })
    expect(answer.status).toBe(202)
    expect(JSON.parse(answer.bytes.toString('utf8'))).toMatchObject({ queued: true, meta: { sessionId: 'ses_recorded' } })
  })

  it('keeps an upstream end-to-end header on a legacy answer', async () => {
    next = { status: 200, headers: { 'content-type': 'application/json', 'x-backend-region': 'eu-1' }, body: Buffer.from('{}') }
    const answer = await postRaw('/v1/headless/runs', { input: 1 })
    expect(answer.headers.get('x-backend-region')).toBe('eu-1')
  })

  it('keeps the content-encoding of a compressed answer it could not read, so the client can decode it', async () => {
    // The gateway asks for identity; an upstream that compresses anyway must not reach the client as undecodable bytes.
    next = { status: 200, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: gzipSync('{"output":"zipped"}') }
    const answer = await postRaw('/v1/headless/runs', { input: 1 })
    expect(answer.status).toBe(200)
    expect(JSON.parse(answer.bytes.toString('utf8'))).toMatchObject({ output: 'zipped' })
  })

  it('keeps the deprecation Link when the upstream answer carries a Link header of its own', async () => {
    next = { status: 200, headers: { 'content-type': 'application/json', link: '</v4/docs>; rel="help"' }, body: Buffer.from('{}') }
    const answer = await postRaw('/v1/headless/runs', { input: 1 }, 'deprecated')
    expect(answer.headers.get('deprecation')).toBe(DEPRECATION_HEADERS.deprecation)
    expect(answer.headers.get('link')).toBe('</v4/docs>; rel="help", <https://example.com/v4-migration>; rel="deprecation", </v4/execute>; rel="successor-version"')
  })
})

describe('the V4 execute body when it is the legacy body as sent (SPEC 4; RFC 8259 4)', () => {
  const upstream = useRecordingUpstream()
  const gw = useGateway(() =>
    testConfig(upstream.url, { tenants: { acme: { upstream: { staging: upstream.url } }, dropper: { upstream: { staging: upstream.url }, legacy: { unknownFields: 'drop' } } } })
  )

  async function executeBody(text: string, tenant = 'acme'): Promise<string> {
    const before = upstream.requests.length
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { ...as(tenant), 'content-type': 'application/json' }, body: text })
    expect(answer.status).toBe(200)
    const [call] = upstream.requests.slice(before)
    expect(call?.url).toBe('/v4/execute')
    return (call?.body as Buffer).toString('utf8')
  }

  it('goes on as the client wrote it when every member goes on unchanged: spacing, member order and escapes kept', async () => {
    const text = '{ "trace" : "a\\"b{,[1.5]", "input": {"x": [1, -250, "\\u00e9", true]}, "policy":"p" }'
    expect(await executeBody(text)).toBe(text)
  })

  it('is serialised when a member name repeats: one member, the value JSON.parse kept (the last)', async () => {
    const sent = await executeBody('{"input":1,"x":{"input":0},"input":2}')
    expect(JSON.parse(sent)).toEqual({ input: 2, x: { input: 0 } })
    expect(sent.match(/"input"/g)).toHaveLength(2)
  })

  it('is serialised when a name repeats deeper down: V4 gets one member, as readers that keep the first or refuse repeats would not', async () => {
    expect(await executeBody('{"input":{"amount":1,"amount":1000}}')).toBe('{"input":{"amount":1000}}')
  })

  it.each([
    ['1.0', '1'],
    ['1e2', '100'],
    ['-0', '0'],
    ['1000000000000000000000', '1e+21']
  ])('is serialised when a number is written another way than JSON writes its value: %s', async (written, serialised) => {
    expect(await executeBody(`{"input":{"count":${written}}}`)).toBe(`{"input":{"count":${serialised}}}`)
  })

  it('is serialised, the checked fields last, when another name could read as one of them without case (Policy, riſk)', async () => {
    expect(await executeBody('{"input":1,"policy":"p","Policy":{"x":1},"riſk":"high"}')).toBe('{"Policy":{"x":1},"riſk":"high","input":1,"policy":"p"}')
    // Java's equalsIgnoreCase folds İ to i one letter at a time.
    expect(await executeBody('{"input":1,"İnput":2}')).toBe('{"İnput":2,"input":1}')
  })

  it('is serialised when the tenant drops unknown members', async () => {
    expect(await executeBody('{ "input": 1, "trace": "abc" }', 'dropper')).toBe('{"input":1}')
  })
})
