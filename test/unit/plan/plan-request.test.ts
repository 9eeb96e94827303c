import { describe, expect, it } from 'vitest'
import { configSchema } from '../../../src/config/schema.js'
import type { RequestHead } from '../../../src/kernel/request-head.js'
import { headersFromRaw } from '../../../src/plan/head-from-input.js'
import { planRequest, type Plan } from '../../../src/plan/plan-request.js'
import { fingerprintToken } from '../../../src/sessions/session-key.js'
import { buildGatewayRuntime } from '../../../src/tenancy/gateway-runtime.js'

const ORIGIN = 'http://127.0.0.1:4010'
const runtime = buildGatewayRuntime(
  configSchema.parse({
    tenancy: { default: 'acme' },
    internalAdmin: { pathPrefixes: ['/v4/internal'] },
    limits: { bodyBytes: 64 },
    tenants: {
      acme: {
        upstream: { staging: ORIGIN },
        legacy: {
          deprecation: { date: '2026-01-01T00:00:00Z' },
          routes: [
            { method: 'POST', path: '/v1/headless/runs', action: 'execute' },
            { method: 'POST', path: '/v1/runs/:runId/invoke', action: 'session-execute', stateKey: 'param:runId' },
            { method: 'GET', path: '/v1/areas/:area', action: 'proxy', rewrite: '/v4/:area' }
          ]
        }
      }
    }
  }),
  undefined
)

function head(method: string, url: string, lines: [string, string][] = []): RequestHead {
  const rawHeaders = [['host', 'gw.example'], ...lines].flat()
  return { startedAt: 0, now: Date.now(), requestId: 'req-1', method, url, httpVersion: '1.1', headers: headersFromRaw(rawHeaders), rawHeaders, clientAddress: '10.0.0.9', protocol: 'http' }
}

function withBody(plan: Plan, body: string): Plan {
  if (plan.kind !== 'read-body') throw new Error(`expected a read-body plan, got ${plan.kind}`)
  return plan.withBody(Buffer.from(body))
}

const runtimeHeaders: [string, string][] = [['authorization', 'Bearer tok-1'], ['content-type', 'application/json']]

describe('planRequest', () => {
  it('plans native traffic as one streamed call with the target as sent and x-forwarded-*', () => {
    const plan = planRequest(runtime, head('POST', '/v4/execute?a=1&', [['x-custom', 'kept'], ['connection', 'close']]))
    expect(plan.kind).toBe('stream')
    if (plan.kind !== 'stream') return
    expect(plan.facts).toMatchObject({ tenant: 'acme', trafficClass: 'native', v4Path: '/v4/execute', legacyRoute: undefined })
    expect(plan.call).toMatchObject({ origin: ORIGIN, method: 'POST', target: '/v4/execute?a=1&' })
    expect(plan.call.headers).toMatchObject({ 'x-custom': 'kept', 'x-forwarded-for': '10.0.0.9', 'x-forwarded-host': 'gw.example', 'x-request-id': 'req-1' })
    expect(plan.call.headers.connection).toBeUndefined()
    expect(plan.answerHeaders).toEqual({})
  })

  it('refuses a blocked path with 403 FORBIDDEN and class blocked', () => {
    const plan = planRequest(runtime, head('GET', '/v4/internal/x'))
    expect(plan).toMatchObject({ kind: 'refuse', error: { code: 'FORBIDDEN' }, facts: { trafficClass: 'blocked' } })
  })

  it('refuses an unknown path with 404 ROUTE_NOT_FOUND and class unknown, naming the tenant', () => {
    expect(planRequest(runtime, head('GET', '/nope'))).toMatchObject({ kind: 'refuse', error: { code: 'ROUTE_NOT_FOUND' }, facts: { tenant: 'acme', trafficClass: 'unknown' } })
  })

  it('puts the request id and deprecation headers on every answer of a legacy route, refusals included', () => {
    const plan = planRequest(runtime, head('POST', '/v1/headless/runs'))
    expect(plan).toMatchObject({ kind: 'refuse', error: { code: 'AUTH_INVALID' }, facts: { trafficClass: 'legacy', legacyRoute: 'POST /v1/headless/runs', credential: 'none' } })
    expect(plan.answerHeaders).toEqual({ 'x-request-id': 'req-1', deprecation: `@${Date.parse('2026-01-01T00:00:00Z') / 1000}`, link: '</v4/execute>; rel="successor-version"' })
  })

  it('refuses a second, different copy of a credential header as CREDENTIALS_CONFLICT', () => {
    const plan = planRequest(runtime, head('POST', '/v1/headless/runs', [['x-session-token', 'a'], ['x-session-token', 'b']]))
    expect(plan).toMatchObject({ kind: 'refuse', error: { code: 'CREDENTIALS_CONFLICT' } })
  })

  it('asks for the body of a runtime route, then plans its execute call with exactly one credential', () => {
    const plan = planRequest(runtime, head('POST', '/v1/headless/runs', [...runtimeHeaders, ['x-api-key', 'tok-1'], ['user-agent', 'sdk/1']]))
    expect(plan).toMatchObject({ kind: 'read-body', limitBytes: 64, facts: { credential: 'session-token', clientFingerprint: fingerprintToken('tok-1', 'header') } })
    const planned = withBody(plan, JSON.stringify({ input: 1, policy: 'p' }))
    expect(planned.kind).toBe('calls')
    if (planned.kind !== 'calls' || planned.calls.action !== 'execute') throw new Error('expected an execute plan')
    expect(planned.calls.execution).toMatchObject({ method: 'POST', path: '/v4/execute', body: '{"input":1,"policy":"p"}' })
    expect(planned.calls.execution.headers).toMatchObject({ authorization: 'Bearer tok-1', 'user-agent': 'sdk/1', 'x-request-id': 'req-1' })
    expect(planned.calls.execution.headers['x-api-key']).toBeUndefined()
  })

  it('plans a session-execute as a start on a miss and an execution whose path is built from the session id', () => {
    const plan = withBody(planRequest(runtime, head('POST', '/v1/runs/run%201/invoke', runtimeHeaders)), JSON.stringify({ input: 'x', state: { route: 'r' }, risk: 'high' }))
    if (plan.kind !== 'calls' || plan.calls.action !== 'session-execute') throw new Error('expected a session-execute plan')
    expect(plan.calls.stateKey).toBe('run 1')
    expect(plan.calls.start()).toMatchObject({ path: '/v4/sessions.start', body: '{"route":"r","risk":"high"}' })
    expect(plan.calls.execution('s/1')).toMatchObject({ path: '/v4/sessions/s%2F1/executions.execute', body: '{"input":"x"}' })
  })

  it('refuses a body over the limit, and a body that is not JSON, with the legacy headers on', () => {
    const headers: [string, string][] = runtimeHeaders
    expect(withBody(planRequest(runtime, head('POST', '/v1/headless/runs', headers)), JSON.stringify({ input: 'x'.repeat(80) }))).toMatchObject({ kind: 'refuse', error: { code: 'PAYLOAD_TOO_LARGE' } })
    const notJson = withBody(planRequest(runtime, head('POST', '/v1/headless/runs', headers)), '{')
    expect(notJson).toMatchObject({ kind: 'refuse', error: { code: 'INVALID_REQUEST' }, answerHeaders: { 'x-request-id': 'req-1' } })
  })

  it('refuses a proxy rewrite that a path parameter carries into a blocked prefix', () => {
    expect(planRequest(runtime, head('GET', '/v1/areas/internal'))).toMatchObject({ kind: 'refuse', error: { code: 'FORBIDDEN' }, facts: { trafficClass: 'blocked', legacyRoute: 'GET /v1/areas/:area' } })
  })

  it('is pure: the same head gives the same plan twice', () => {
    const request = head('POST', '/v1/runs/r/invoke', runtimeHeaders)
    const first = withBody(planRequest(runtime, request), '{"input":1}')
    const second = withBody(planRequest(runtime, request), '{"input":1}')
    expect(JSON.stringify(first)).toBe(JSON.stringify(second))
  })
})

// SPEC 16's lease is 2 × (upstreamTimeoutMs + connectTimeoutMs); the connect timeout is
// restart-only (SPEC 8): the pool keeps the start's, so the lease must too.
describe('planRequest of a keyed call after a reload changed limits.connectTimeoutMs', () => {
  it('leases the claim for the connect timeout the pool still uses, not the file’s new one', () => {
    const config = (connectTimeoutMs: number) =>
      configSchema.parse({
        tenancy: { default: 'acme' },
        limits: { upstreamTimeoutMs: 1_000, connectTimeoutMs },
        tenants: { acme: { upstream: { staging: ORIGIN }, legacy: { idempotency: {}, routes: [{ method: 'POST', path: '/v1/headless/runs', action: 'execute' }] } } }
      })
    const started = buildGatewayRuntime(config(60_000), undefined)
    // What a reload does: the next runtime gets the previous one's context.
    const reloaded = buildGatewayRuntime(config(1), undefined, started.context)
    expect(reloaded.connectTimeoutMs).toBe(60_000)
    const plan = withBody(planRequest(reloaded, head('POST', '/v1/headless/runs', [...runtimeHeaders, ['idempotency-key', 'k-1']])), '{"input":1}')
    expect(plan.kind).toBe('idempotent')
    if (plan.kind !== 'idempotent') return
    expect(plan.idempotency.leaseMs).toBe(2 * (1_000 + 60_000))
  })
})
