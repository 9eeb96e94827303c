import { beforeEach, describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { rawExchange as exchangeRaw } from '../helpers/raw-http.js'
import { useRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js'
import { useGateway } from '../helpers/start-gateway.js'

/**
 * Writes `head` as-is on a fresh socket and returns everything the server wrote until it closed
 * (the request says `Connection: close`). The socket is not half-closed: Node aborts a request
 * whose client ended its side.
 */
async function rawExchange(baseUrl: string, head: string): Promise<string> {
  return (await exchangeRaw(baseUrl, head, { timeoutMs: 5_000 })).bytes.toString('latin1')
}

function statusOf(rawResponse: string): number {
  return Number(/^HTTP\/1\.1 (\d{3})/.exec(rawResponse)?.[1])
}

function bodyOf(rawResponse: string): unknown {
  return JSON.parse(rawResponse.slice(rawResponse.indexOf('\r\n\r\n') + 4))
}

describe('tenancy and upstream selection', () => {
  const staging = useRecordingUpstream()
  const production = useRecordingUpstream()
  const betaUpstream = useRecordingUpstream()
  /** Configured nowhere: nothing may ever reach it. */
  const other = useRecordingUpstream()
  const tenants = (): Record<string, unknown> => ({
    acme: { upstream: { staging: staging.url, production: production.url } },
    live: { upstream: { staging: staging.url, production: production.url, target: 'production' } },
    beta: { upstream: { staging: betaUpstream.url } }
  })
  const gw = useGateway(() => ({
    log: { level: 'silent' },
    tenancy: { hosts: { 'beta.example.com': 'beta', '[::1]': 'beta' }, default: 'acme' },
    tenants: tenants()
  }))
  const strict = useGateway(() => ({
    log: { level: 'silent' },
    tenancy: { header: 'X-Org', hosts: { 'beta.example.com': 'beta' } },
    tenants: tenants()
  }))
  beforeEach(() => {
    for (const upstream of [staging, production, betaUpstream, other]) upstream.requests.length = 0
  })

  function callsTo(upstream: RecordingUpstream): string[] {
    return upstream.requests.map((request) => `${request.method} ${request.url}`)
  }

  it('sends a request without tenant header or known Host to the default tenant', async () => {
    const answer = await send(gw.url, '/v4/policies')
    expect(answer.status).toBe(200)
    expect(callsTo(staging)).toEqual(['GET /v4/policies'])
  })

  it('uses staging when production is configured but target is not set (staging-first)', async () => {
    const answer = await send(gw.url, '/v4/policies', { headers: { 'x-tenant-id': 'acme' } })
    expect(answer.status).toBe(200)
    expect(callsTo(staging)).toEqual(['GET /v4/policies'])
    expect(callsTo(production)).toEqual([])
  })

  it('uses production only for a tenant with target: production', async () => {
    const answer = await send(gw.url, '/v4/policies', { headers: { 'x-tenant-id': 'live' } })
    expect(answer.status).toBe(200)
    expect(callsTo(production)).toEqual(['GET /v4/policies'])
    expect(callsTo(staging)).toEqual([])
  })

  it('selects between two tenants with different upstreams by x-tenant-id', async () => {
    await send(gw.url, '/v4/policies?n=1', { headers: { 'x-tenant-id': 'beta' } })
    await send(gw.url, '/v4/policies?n=2', { headers: { 'x-tenant-id': 'acme' } })
    expect(callsTo(betaUpstream)).toEqual(['GET /v4/policies?n=1'])
    expect(callsTo(staging)).toEqual(['GET /v4/policies?n=2'])
  })

  it('selects the tenant by Host lower-cased and without its port', async () => {
    const answer = await send(gw.url, '/v4/policies', { headers: { host: 'Beta.Example.COM:8443' } })
    expect(answer.status).toBe(200)
    expect(callsTo(betaUpstream)).toEqual(['GET /v4/policies'])
  })

  it('selects the tenant by an IPv6 Host', async () => {
    const answer = await send(gw.url, '/v4/policies', { headers: { host: '[::1]:8080' } })
    expect(answer.status).toBe(200)
    expect(callsTo(betaUpstream)).toEqual(['GET /v4/policies'])
  })

  it.each(['[0:0:0:0:0:0:0:1]', '[0:0::1]:8080', '[::1%25lo]'])('selects the tenant by an IPv6 Host in another spelling of the key\'s address: %s', async (host) => {
    const answer = await send(gw.url, '/v4/policies', { headers: { host } })
    expect(answer.status).toBe(200)
    expect(callsTo(betaUpstream)).toEqual(['GET /v4/policies'])
  })

  it('lets the tenant header win over the Host map', async () => {
    await send(gw.url, '/v4/policies', { headers: { host: 'beta.example.com', 'x-tenant-id': 'acme' } })
    expect(callsTo(staging)).toEqual(['GET /v4/policies'])
    expect(callsTo(betaUpstream)).toEqual([])
  })

  it('reads the tenant from a configured tenancy.header', async () => {
    const answer = await send(strict.url, '/v4/policies', { headers: { 'x-org': 'beta' } })
    expect(answer.status).toBe(200)
    expect(callsTo(betaUpstream)).toEqual(['GET /v4/policies'])
  })

  it('answers 404 TENANT_UNKNOWN for an unconfigured tenant and forwards nothing', async () => {
    const answer = await send(gw.url, '/v4/policies', { headers: { 'x-tenant-id': 'ghost' } })
    expect(answer.status).toBe(404)
    expect(answer.json.error.code).toBe('TENANT_UNKNOWN')
    expect(answer.json.error.requestId).toBe(answer.headers['x-request-id'])
    expect([...callsTo(staging), ...callsTo(production), ...callsTo(betaUpstream), ...callsTo(other)]).toEqual([])
  })

  it('answers 404 TENANT_UNKNOWN on a legacy route too, before any upstream call', async () => {
    const answer = await send(gw.url, '/v1/headless/runs', { headers: { 'x-tenant-id': 'ghost', authorization: 'Bearer tok' }, json: { input: 1 } })
    expect(answer.status).toBe(404)
    expect(answer.json.error.code).toBe('TENANT_UNKNOWN')
    expect([...callsTo(staging), ...callsTo(production), ...callsTo(betaUpstream)]).toEqual([])
  })

  it('answers 400 TENANT_REQUIRED without tenant header, mapped Host or default, and forwards nothing', async () => {
    const answer = await send(strict.url, '/v4/policies', { headers: { host: 'unmapped.example.com' } })
    expect(answer.status).toBe(400)
    expect(answer.json.error.code).toBe('TENANT_REQUIRED')
    expect(answer.headers['content-type']).toMatch(/^application\/json/)
    expect([...callsTo(staging), ...callsTo(production), ...callsTo(betaUpstream), ...callsTo(other)]).toEqual([])
  })

  it('never lets a Host naming another server change the upstream', async () => {
    const otherHost = new URL(other.url).host
    const answer = await send(gw.url, '/v4/policies', { headers: { host: otherHost } })
    expect(answer.status).toBe(200)
    expect(callsTo(other)).toEqual([])
    expect(callsTo(staging)).toEqual(['GET /v4/policies'])
  })

  it('answers 400 INVALID_REQUEST to an absolute-form request target and forwards nothing (never an open proxy)', async () => {
    const otherHost = new URL(other.url).host
    const response = await rawExchange(gw.url, `GET http://${otherHost}/v4/x HTTP/1.1\r\nHost: ${otherHost}\r\nConnection: close\r\n\r\n`)
    expect(statusOf(response)).toBe(400)
    expect(bodyOf(response)).toMatchObject({ error: { code: 'INVALID_REQUEST' } })
    expect(callsTo(other)).toEqual([])
    expect(callsTo(staging)).toEqual([])
  })

  it('answers 400 to an absolute-form target on a legacy path and forwards nothing', async () => {
    const otherHost = new URL(other.url).host
    const body = JSON.stringify({ input: 1 })
    const response = await rawExchange(
      gw.url,
      `POST http://${otherHost}/v1/headless/runs HTTP/1.1\r\nHost: ${otherHost}\r\nAuthorization: Bearer tok\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`
    )
    expect(statusOf(response)).toBe(400)
    expect(callsTo(other)).toEqual([])
    expect(callsTo(staging)).toEqual([])
  })
})
