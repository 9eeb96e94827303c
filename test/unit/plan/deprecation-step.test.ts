import { createHash, hash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { configSchema } from '../../../src/config/schema.js'
import type { RequestHead } from '../../../src/kernel/request-head.js'
import { brownoutBucket } from '../../../src/plan/deprecation-step.js'
import { explainRequest } from '../../../src/plan/explain-request.js'
import { headersFromRaw } from '../../../src/plan/head-from-input.js'
import { planRequest, type Plan } from '../../../src/plan/plan-request.js'
import { BrownoutPauses } from '../../../src/tenancy/brownout-pauses.js'
import { buildGatewayRuntime } from '../../../src/tenancy/gateway-runtime.js'

const HOUR = 3_600_000
const DAY = 24 * HOUR
const NOW = Date.now()
const iso = (ms: number): string => new Date(ms).toISOString()
/** The client id SPEC 12 gives a credential: fp: and 16 hex digits of its SHA-256. */
const clientIdOf = (token: string): string => `fp:${hash('sha256', token, 'hex').slice(0, 16)}`

/** A tenant deprecated 30 days ago, in a brownout window now, its sunset 30 days ahead. */
function runtimeWith(deprecation: Record<string, unknown>, extra: Record<string, unknown> = {}, pauses = new BrownoutPauses()) {
  const config = configSchema.parse({
    tenancy: { default: 'acme' },
    tenants: {
      acme: {
        upstream: { staging: 'http://127.0.0.1:4010' },
        legacy: {
          deprecation: { date: iso(NOW - 30 * DAY), sunset: iso(NOW + 30 * DAY), link: 'https://docs.example.com/v4', ...deprecation },
          routes: [
            { method: 'POST', path: '/v1/headless/runs', action: 'execute' },
            { method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/stateId' },
            { method: 'GET', path: '/v1/areas/:area', action: 'proxy', rewrite: '/v4/areas/:area' }
          ]
        },
        ...extra
      }
    }
  })
  return buildGatewayRuntime(config, undefined, pauses)
}

const OPEN_WINDOW = { windows: [{ start: iso(NOW - HOUR), end: iso(NOW + HOUR) }] }

function head(method: string, url: string, token: string | undefined, now = NOW): RequestHead {
  const rawHeaders = ['host', 'gw.example', 'content-type', 'application/json', ...(token === undefined ? [] : ['authorization', `Bearer ${token}`])]
  return { startedAt: 0, now, requestId: 'req-1', method, url, httpVersion: '1.1', headers: headersFromRaw(rawHeaders), rawHeaders, clientAddress: '10.0.0.9', protocol: 'http' }
}

function refusal(plan: Plan) {
  return plan.kind === 'refuse' ? plan.error : undefined
}

/** Tokens whose clients fall below and at-or-above a bucket bound. */
function tokensAround(bound: number): { inside: string; outside: string } {
  let inside: string | undefined
  let outside: string | undefined
  for (let index = 0; inside === undefined || outside === undefined; index++) {
    const token = `tok-${index}`
    if (brownoutBucket('acme', clientIdOf(token)) < bound) inside ??= token
    else outside ??= token
  }
  return { inside, outside }
}

describe('the deprecation step (SPEC 13)', () => {
  it('computes the bucket as SHA-256("brownout\\0" + tenant + "\\0" + client id), first 8 bytes big-endian, mod 10000', () => {
    const digest = createHash('sha256').update('brownout\0acme\0fp:0123456789abcdef').digest()
    expect(brownoutBucket('acme', 'fp:0123456789abcdef')).toBe(Number(digest.readBigUInt64BE(0) % 10_000n))
  })

  it('answers 410 LEGACY_BROWNOUT with error.migration in an open window, with the deprecation headers and no Retry-After', () => {
    const plan = planRequest(runtimeWith({ brownouts: OPEN_WINDOW }), head('POST', '/v1/headless/runs', 'tok-1'))
    expect(plan.kind).toBe('refuse')
    expect(refusal(plan)).toMatchObject({
      code: 'LEGACY_BROWNOUT',
      statusCode: 410,
      migration: { windowEnd: iso(NOW + HOUR), sunset: iso(NOW + 30 * DAY), successor: '/v4/execute', link: 'https://docs.example.com/v4' }
    })
    expect(plan.answerHeaders).toMatchObject({ deprecation: expect.stringMatching(/^@\d+$/), sunset: new Date(NOW + 30 * DAY).toUTCString() })
    expect(plan.answerHeaders.link).toBe('<https://docs.example.com/v4>; rel="deprecation", </v4/execute>; rel="successor-version"')
    expect(plan.answerHeaders['retry-after']).toBeUndefined()
    expect(plan.facts.deprecation).toMatchObject({ clientId: clientIdOf('tok-1'), action: 'brownout' })
  })

  it('browns out before the credential and media-type checks: a client without a credential is anonymous, selected at 100', () => {
    const plan = planRequest(runtimeWith({ brownouts: OPEN_WINDOW }), head('POST', '/v1/headless/runs', undefined))
    expect(refusal(plan)?.code).toBe('LEGACY_BROWNOUT')
    expect(plan.facts.deprecation?.clientId).toBe('anonymous')
  })

  it('never selects anonymous below 100 percent', () => {
    const plan = planRequest(runtimeWith({ brownouts: { ...OPEN_WINDOW, clients: 99.99 } }), head('POST', '/v1/headless/runs', undefined))
    expect(refusal(plan)?.code).toBe('AUTH_INVALID')
  })

  it('serves outside every window, and after a window has ended', () => {
    const runtime = runtimeWith({ brownouts: { windows: [{ start: iso(NOW + HOUR), end: iso(NOW + 2 * HOUR) }] } })
    expect(planRequest(runtime, head('POST', '/v1/headless/runs', 'tok-1')).kind).toBe('read-body')
    expect(planRequest(runtime, head('POST', '/v1/headless/runs', 'tok-1', NOW + 2 * HOUR)).kind).toBe('read-body')
    expect(refusal(planRequest(runtime, head('POST', '/v1/headless/runs', 'tok-1', NOW + HOUR)))?.code).toBe('LEGACY_BROWNOUT')
  })

  it('opens the escalation ladder\'s window n at first + n × everyMs for durationsMs[n]', () => {
    const runtime = runtimeWith({ brownouts: { escalation: { first: iso(NOW - 3 * HOUR), everyMs: 2 * HOUR, durationsMs: [HOUR, HOUR / 2, 3 * HOUR] } } })
    const at = (ms: number) => refusal(planRequest(runtime, head('POST', '/v1/headless/runs', 'tok-1', ms)))?.code
    expect(at(NOW - 3 * HOUR)).toBe('LEGACY_BROWNOUT')
    expect(at(NOW - 2 * HOUR)).toBeUndefined()
    expect(at(NOW - HOUR + HOUR / 4)).toBe('LEGACY_BROWNOUT')
    expect(at(NOW - HOUR / 2)).toBeUndefined()
    expect(at(NOW + 3 * HOUR)).toBe('LEGACY_BROWNOUT')
    expect(at(NOW + 4 * HOUR)).toBeUndefined()
  })

  it('selects a client by its bucket alone: the same on every route, and kept when the percentage grows', () => {
    const { inside, outside } = tokensAround(2500)
    const at = (percent: number, token: string, method: string, url: string) => refusal(planRequest(runtimeWith({ brownouts: { ...OPEN_WINDOW, clients: percent } }), head(method, url, token)))?.code
    for (const [method, url] of [['POST', '/v1/headless/runs'], ['POST', '/v1/runs/invoke'], ['GET', '/v1/areas/eu']]) {
      expect(at(25, inside, method as string, url as string)).toBe('LEGACY_BROWNOUT')
      expect(at(50, inside, method as string, url as string)).toBe('LEGACY_BROWNOUT')
      expect(at(25, outside, method as string, url as string)).not.toBe('LEGACY_BROWNOUT')
    }
    expect(at(0, inside, 'POST', '/v1/headless/runs')).toBeUndefined()
  })

  it('answers 410 LEGACY_GONE after the sunset with afterSunset: gone, error.migration without windowEnd', () => {
    const runtime = runtimeWith({ sunset: iso(NOW - DAY), afterSunset: 'gone' })
    const plan = planRequest(runtime, head('POST', '/v1/runs/invoke', 'tok-1'))
    expect(refusal(plan)).toMatchObject({ code: 'LEGACY_GONE', migration: { sunset: iso(NOW - DAY), successor: '/v4/sessions.start' } })
    expect(refusal(plan)?.migration?.windowEnd).toBeUndefined()
    expect(planRequest(runtimeWith({ sunset: iso(NOW - DAY) }), head('POST', '/v1/runs/invoke', 'tok-1')).kind).toBe('read-body')
  })

  it('spares an exempt client until its until, and no longer', () => {
    const exempt = (until: number) => [{ client: clientIdOf('tok-1'), until: iso(until), reason: 'contract' }]
    const spared = planRequest(runtimeWith({ brownouts: OPEN_WINDOW, exempt: exempt(NOW + DAY) }), head('POST', '/v1/headless/runs', 'tok-1'))
    expect(spared.kind).toBe('read-body')
    expect(spared.facts.deprecation).toMatchObject({ action: 'exempt', exemptUntil: iso(NOW + DAY) })
    expect(refusal(planRequest(runtimeWith({ brownouts: OPEN_WINDOW, exempt: exempt(NOW - 1) }), head('POST', '/v1/headless/runs', 'tok-1')))?.code).toBe('LEGACY_BROWNOUT')
    expect(refusal(planRequest(runtimeWith({ sunset: iso(NOW - DAY), afterSunset: 'gone', exempt: exempt(NOW + DAY) }), head('POST', '/v1/headless/runs', 'tok-1')))).toBeUndefined()
  })

  it('stops brownouts and gone answers while a pause of the tenant or the route holds, and not after it', () => {
    const pauses = new BrownoutPauses()
    const runtime = runtimeWith({ brownouts: OPEN_WINDOW }, {}, pauses)
    pauses.set({ tenant: 'acme', route: 'POST /v1/headless/runs', until: iso(NOW + HOUR / 2), reason: 'incident', setAt: iso(NOW) })
    const paused = planRequest(runtime, head('POST', '/v1/headless/runs', 'tok-1'))
    expect(paused.kind).toBe('read-body')
    expect(paused.facts.deprecation?.pausedUntil).toBe(iso(NOW + HOUR / 2))
    expect(refusal(planRequest(runtime, head('POST', '/v1/runs/invoke', 'tok-1')))?.code).toBe('LEGACY_BROWNOUT')
    expect(refusal(planRequest(runtime, head('POST', '/v1/headless/runs', 'tok-1', NOW + HOUR / 2)))?.code).toBe('LEGACY_BROWNOUT')
    pauses.set({ tenant: 'acme', route: null, until: iso(NOW + HOUR), reason: 'incident', setAt: iso(NOW) })
    expect(planRequest(runtime, head('POST', '/v1/runs/invoke', 'tok-1')).kind).toBe('read-body')
    const gone = runtimeWith({ sunset: iso(NOW - DAY), afterSunset: 'gone' }, {}, pauses)
    expect(planRequest(gone, head('POST', '/v1/runs/invoke', 'tok-1')).kind).toBe('read-body')
  })

  it('names the proxy route\'s rewritten path as its successor', () => {
    const plan = planRequest(runtimeWith({ brownouts: OPEN_WINDOW }), head('GET', '/v1/areas/eu', 'tok-1'))
    expect(refusal(plan)?.migration?.successor).toBe('/v4/areas/eu')
    expect(plan.answerHeaders.link).toContain('</v4/areas/eu>; rel="successor-version"')
  })

  it('gives a session answer\'s successor-version the session\'s path, and leaves it out with successor: false', () => {
    const plan = planRequest(runtimeWith({ sunsetLink: 'https://docs.example.com/sunset' }), head('POST', '/v1/runs/invoke', 'tok-1'))
    if (plan.kind !== 'read-body') throw new Error(plan.kind)
    const calls = plan.withBody(Buffer.from('{"input":1}'))
    if (calls.kind !== 'calls') throw new Error(calls.kind)
    expect(calls.answerHeaders.link).toBe('<https://docs.example.com/v4>; rel="deprecation", <https://docs.example.com/sunset>; rel="sunset", </v4/sessions.start>; rel="successor-version"')
    expect(calls.sessionLink?.('s 1')).toBe('<https://docs.example.com/v4>; rel="deprecation", <https://docs.example.com/sunset>; rel="sunset", </v4/sessions/s%201/executions.execute>; rel="successor-version"')
    const without = planRequest(runtimeWith({ successor: false }), head('POST', '/v1/headless/runs', 'tok-1'))
    expect(without.answerHeaders.link).toBe('<https://docs.example.com/v4>; rel="deprecation"')
  })

  it('takes a route\'s deprecation from migration.routes, merged over the tenant\'s; null removes it', () => {
    const runtime = runtimeWith({}, {
      migration: {
        routes: {
          'POST /v1/headless/runs': { deprecation: { brownouts: OPEN_WINDOW } },
          'GET /v1/areas/:area': { deprecation: null }
        }
      }
    })
    const browned = planRequest(runtime, head('POST', '/v1/headless/runs', 'tok-1'))
    expect(refusal(browned)).toMatchObject({ code: 'LEGACY_BROWNOUT', migration: { sunset: iso(NOW + 30 * DAY), link: 'https://docs.example.com/v4' } })
    expect(planRequest(runtime, head('POST', '/v1/runs/invoke', 'tok-1')).kind).toBe('read-body')
    const proxied = planRequest(runtime, head('GET', '/v1/areas/eu', 'tok-1'))
    expect(proxied.kind).toBe('stream')
    // No deprecation headers; the migration block makes the tenant one that says who served it (SPEC 14).
    expect(proxied.answerHeaders).toEqual({ 'x-request-id': 'req-1', 'x-v4gw-served-by': 'v4' })
  })
})

describe('explain shows the deprecation decision (SPEC 13, 14)', () => {
  it('prints the client, the action and the window end, at the instant given', () => {
    const runtime = runtimeWith({ brownouts: { windows: [{ start: iso(NOW + DAY), end: iso(NOW + DAY + HOUR) }] } })
    const input = { method: 'POST', path: '/v1/headless/runs', headers: { authorization: 'Bearer tok-1' }, body: { input: 1 } }
    expect(explainRequest(runtime, input)).toMatchObject({ deprecation: { clientId: clientIdOf('tok-1'), action: 'header' }, calls: [{ url: 'http://127.0.0.1:4010/v4/execute' }] })
    const during = explainRequest(runtime, { ...input, at: iso(NOW + DAY + 1) })
    expect(during).toMatchObject({ deprecation: { action: 'brownout', windowEnd: iso(NOW + DAY + HOUR), bucket: brownoutBucket('acme', clientIdOf('tok-1')) }, answer: { status: 410, code: 'LEGACY_BROWNOUT' }, calls: [] })
  })
})

describe('SPEC 12 client ids in the brownout selection', () => {
  const byHeader = { clients: { key: ['header:x-client-id', 'credential'] } }

  function headWith(extra: string[], now = NOW): RequestHead {
    const rawHeaders = ['host', 'gw.example', 'content-type', 'application/json', ...extra]
    return { startedAt: 0, now, requestId: 'req-1', method: 'POST', url: '/v1/headless/runs', httpVersion: '1.1', headers: headersFromRaw(rawHeaders), rawHeaders, clientAddress: '10.0.0.9', protocol: 'http' }
  }

  /** A header id whose bucket falls below `bound`, and one at or above it. */
  function headerIdsAround(bound: number): { inside: string; outside: string } {
    let inside: string | undefined
    let outside: string | undefined
    for (let index = 0; inside === undefined || outside === undefined; index++) {
      if (brownoutBucket('acme', `hdr:client-${index}`) < bound) inside ??= `client-${index}`
      else outside ??= `client-${index}`
    }
    return { inside, outside }
  }

  it('selects by the header id before the credential: a client keeps its id, and its fate, when its session token rotates', () => {
    const { inside, outside } = headerIdsAround(5000)
    const runtime = runtimeWith({ brownouts: { ...OPEN_WINDOW, clients: 50 } }, byHeader)
    for (const token of ['tok-1', 'tok-2', 'tok-3']) {
      const selected = planRequest(runtime, headWith(['x-client-id', inside, 'authorization', `Bearer ${token}`]))
      expect(refusal(selected)?.code).toBe('LEGACY_BROWNOUT')
      expect(selected.facts).toMatchObject({ clientId: `hdr:${inside}`, deprecation: { clientId: `hdr:${inside}`, bucket: brownoutBucket('acme', `hdr:${inside}`) } })
      expect(planRequest(runtime, headWith(['x-client-id', outside, 'authorization', `Bearer ${token}`])).kind).toBe('read-body')
    }
  })

  it('falls back to the credential without the header, and exempts a header id', () => {
    const runtime = runtimeWith({ brownouts: OPEN_WINDOW, exempt: [{ client: 'hdr:contract-42', until: iso(NOW + DAY) }] }, byHeader)
    expect(planRequest(runtime, headWith(['authorization', 'Bearer tok-1'])).facts.clientId).toBe(clientIdOf('tok-1'))
    const exempt = planRequest(runtime, headWith(['x-client-id', 'contract-42', 'authorization', 'Bearer tok-1']))
    expect(exempt.kind).toBe('read-body')
    expect(exempt.facts.deprecation).toMatchObject({ clientId: 'hdr:contract-42', action: 'exempt' })
  })

  it('names the client explain was given on a request refused as a loop, as on any other', () => {
    const runtime = runtimeWith({}, byHeader)
    const looped = headWith(['via', runtime.via, 'authorization', 'Bearer tok-1'])
    expect(refusal(planRequest(runtime, looped))?.code).toBe('LOOP_DETECTED')
    expect(planRequest(runtime, looped).facts.clientId).toBe(clientIdOf('tok-1'))
    expect(planRequest(runtime, looped, { clientId: 'hdr:contract-42' }).facts.clientId).toBe('hdr:contract-42')
  })

  it('gives an id to a request with two different credentials, from the first, and browns it out before the 400 (a conflict does not prevent an id)', () => {
    const runtime = runtimeWith({ brownouts: OPEN_WINDOW })
    const plan = planRequest(runtime, headWith(['authorization', 'Bearer tok-1', 'x-api-key', 'tok-2']))
    expect(plan.facts.clientId).toBe(clientIdOf('tok-1'))
    expect(refusal(plan)?.code).toBe('LEGACY_BROWNOUT')
    // Outside a window the conflict is what the client hears.
    const served = planRequest(runtimeWith({}), headWith(['authorization', 'Bearer tok-1', 'x-api-key', 'tok-2']))
    expect(refusal(served)?.code).toBe('CREDENTIALS_CONFLICT')
    expect(served.facts.clientId).toBe(clientIdOf('tok-1'))
  })

  it('never takes the credential as an id: a header id is its value only when it is plainly an id, else a hash', () => {
    const plan = planRequest(runtimeWith({}, byHeader), headWith(['x-client-id', 'not an id; has spaces', 'authorization', 'Bearer tok-1']))
    expect(plan.facts.clientId).toBe(`hdr#${hash('sha256', 'not an id; has spaces', 'hex').slice(0, 16)}`)
  })
})
