import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { rawExchange } from '../helpers/raw-http.js'
import { useOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { testConfig, useGateway, type StartedGateway } from '../helpers/start-gateway.js'
import { until } from '../helpers/until.js'

// Issue 30 point 3 (SPEC 17): no credential in any span, attribute, event, resource or exported
// byte. Secrets are planted in every header, query and body position a request can carry them,
// and in the collector's own header; the bytes that reached the collector are searched for each.

const SECRETS = {
  bearer: 'tok-bearer-5f1e9a',
  sessionHeader: 'tok-session-hdr-77c2',
  apiKey: 'key_apikey-secret-31d8',
  serviceKey: 'key_service-secret-c0de',
  query: 'tok-query-cred-a9b4',
  cookie: 'cookie-secret-4e21',
  proxyAuth: 'proxy-auth-secret-8b7c',
  body: 'body-secret-input-6d03',
  tracestate: 'tracestate-secret-2f5a',
  baggage: 'baggage-secret-9c1e',
  customHeader: 'custom-header-secret-0b3f',
  collector: 'collector-key-secret-e4d2'
} as const

const COLLECTOR_HEADERS = { 'x-collector-key': SECRETS.collector }

function secretConfig(upstreamUrl: string, receiver: OtlpReceiver, protocol: string): Record<string, unknown> {
  return testConfig(upstreamUrl, {
    log: { level: 'debug' },
    credentials: { queryParam: 'access_token' },
    tracing: { enabled: true, endpoint: receiver.endpoint, protocol, headers: COLLECTOR_HEADERS, sampleRatio: 1, trustIncoming: true, forwardBaggage: true, batchDelayMs: 20 },
    tenants: {
      acme: {
        upstream: { staging: upstreamUrl },
        legacy: {
          routes: [
            { method: 'POST', path: '/v1/headless/runs', action: 'execute' },
            { method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/stateId' },
            { method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }
          ]
        }
      }
    }
  })
}

/** Every way a request carries something secret, on one request of each kind. */
async function sendSecrets(gw: StartedGateway): Promise<number[]> {
  const others = {
    cookie: `sid=${SECRETS.cookie}`,
    'proxy-authorization': `Basic ${SECRETS.proxyAuth}`,
    tracestate: `vendor=${SECRETS.tracestate}`,
    baggage: `k=${SECRETS.baggage}`,
    'x-custom-secret': SECRETS.customHeader,
    traceparent: `00-${'c'.repeat(32)}-${'d'.repeat(16)}-01`
  }
  const body = { input: SECRETS.body, stateId: 'secret-state' }
  const statuses = await Promise.all([
    send(gw.url, '/v1/headless/runs', { headers: { authorization: `Bearer ${SECRETS.bearer}`, ...others }, json: body }),
    send(gw.url, '/v1/runs/invoke', { headers: { 'x-session-token': SECRETS.sessionHeader, ...others }, json: body }),
    send(gw.url, `/v1/headless/runs?access_token=${SECRETS.query}`, { headers: others, json: body }),
    // Refused: two credentials, a service key on a runtime route.
    send(gw.url, '/v1/headless/runs', { headers: { authorization: `Bearer ${SECRETS.bearer}`, 'x-api-key': SECRETS.apiKey, ...others }, json: body }),
    send(gw.url, '/v1/headless/runs', { headers: { 'x-service-api-key': SECRETS.serviceKey, ...others }, json: body }),
    // A proxy route and native traffic, both streamed.
    send(gw.url, `/v1/policies?access_token=${SECRETS.query}`, { headers: others }),
    send(gw.url, `/v4/anything?access_token=${SECRETS.query}`, { headers: { authorization: `Bearer ${SECRETS.bearer}`, 'x-api-key': SECRETS.apiKey, ...others } })
  ])
  return statuses.map((answer) => answer.status)
}

describe.each(['http/protobuf', 'http/json'])('no credential in any exported byte (%s)', (protocol) => {
  const upstream = useRecordingUpstream((request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify(request.url === '/v4/sessions.start' ? { sessionId: 'sess-1' } : { output: 'ok', meta: {} }))
  })
  const receiver = useOtlpReceiver()
  const gw = useGateway(() => secretConfig(upstream.url, receiver, protocol))

  it('exports spans of every request, with none of the planted secrets in the bytes the collector got', async () => {
    const statuses = await sendSecrets(gw)
    expect(statuses).toEqual([200, 200, 200, 400, 401, 200, 200])
    // Seven SERVER spans, and the calls' CLIENT spans, all exported.
    await until(() => receiver.spans.filter((span) => span.kind === 'SERVER').length === 7)
    await until(() => receiver.spans.filter((span) => span.kind === 'CLIENT').length === 6)
    await gw.close()
    const exported = Buffer.concat(receiver.bodies)
    expect(exported.length).toBeGreaterThan(0)
    for (const [name, secret] of Object.entries(SECRETS)) {
      expect(exported.includes(Buffer.from(secret)), `${name} in an exported byte`).toBe(false)
      // Percent-encoded too, as a query would carry it.
      expect(exported.includes(Buffer.from(encodeURIComponent(secret))), `${name} (encoded) in an exported byte`).toBe(false)
    }
    // The collector's header reached the collector, and no log line holds it.
    expect(receiver.requests.every((request) => request.headers['x-collector-key'] === SECRETS.collector)).toBe(true)
    expect(gw.logs.text()).not.toContain(SECRETS.collector)
  })
})

describe('no userinfo of a refused absolute-form target in an exported byte', () => {
  const upstream = useRecordingUpstream()
  const receiver = useOtlpReceiver()
  const gw = useGateway(() => secretConfig(upstream.url, receiver, 'http/json'))

  it('exports no piece of the userinfo of an absolute-form target, a ? in its password included (refused, but traced)', async () => {
    await rawExchange(gw.url, 'GET http://user:pw-part-one?pw-part-two@127.0.0.1:9/v4/x?q=1 HTTP/1.1\r\nHost: gateway.test\r\nx-request-id: absolute-userinfo\r\nConnection: close\r\n\r\n', { timeoutMs: 3_000 })
    await until(() => receiver.spans.some((span) => span.kind === 'SERVER'))
    await gw.close()
    const exported = Buffer.concat(receiver.bodies)
    for (const piece of ['pw-part-one', 'pw-part-two']) expect(exported.includes(Buffer.from(piece)), piece).toBe(false)
  })
})
