import { spawnSync } from 'node:child_process'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { request } from 'undici'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { arrivalBarrier } from '../helpers/arrival-barrier.js'
import { answerJson, refusingOrigin, resetConnection, useFaultUpstream } from '../helpers/fault-upstream.js'
import { send } from '../helpers/http.js'
import { answerAfter, useRecordingUpstream } from '../helpers/recording-upstream.js'
import { configSchema, LEGACY_V1_ROUTES } from '../../src/config/schema.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

// SPEC 17 metrics, scraped from a real gateway's /metrics.

const ALICE = { authorization: 'Bearer demo-token-alice' }
const V4_ANSWER = { output: 'ok', meta: { requestId: 'r', timingMs: { total: 1 } } }

async function scrape(gateway: StartedGateway): Promise<string> {
  return (await send(gateway.adminUrl, '/metrics')).text
}

/** The value of the one series `name{labels}` (labels as written, in order), or undefined. */
function seriesValue(text: string, name: string, labels: string): number | undefined {
  const line = text.split('\n').find((one) => one.startsWith(`${name}{${labels}} `))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}

describe('SPEC 17 metrics', () => {
  const upstream = useRecordingUpstream(answerAfter(0, V4_ANSWER))
  const slow = useRecordingUpstream(answerAfter(400, V4_ANSWER))
  const faults = useFaultUpstream()

  it('passes promtool check metrics with no warning, on a gateway that has served every kind of request', async () => {
    const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' })
    // CI installs it (.ci/run); without it this test cannot say anything, so it fails.
    expect(promtool.error, 'promtool is not installed: apt-get install prometheus').toBeUndefined()
    const gateway = await startGateway(testConfig(upstream.url))
    await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
    await send(gateway.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    await send(gateway.url, '/nowhere', { headers: ALICE })
    const checked = spawnSync('promtool', ['check', 'metrics'], { input: await scrape(gateway), encoding: 'utf8' })
    expect(`${checked.stdout}${checked.stderr}`).toBe('')
    expect(checked.status).toBe(0)
  })

  it('labels requests with the exact status, and native traffic with route="native"', async () => {
    const gateway = await startGateway(testConfig(upstream.url))
    await send(gateway.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    await send(gateway.url, '/v1/headless/runs', { headers: { 'content-type': 'text/plain', ...ALICE }, body: 'x' })
    const text = await scrape(gateway)
    expect(seriesValue(text, 'v4gw_requests_total', 'tenant="acme",class="native",route="native",status_class="2xx",code="200"')).toBe(1)
    expect(seriesValue(text, 'v4gw_requests_total', 'tenant="acme",class="legacy",route="POST /v1/headless/runs",status_class="4xx",code="415"')).toBe(1)
  })

  it('leaves the code label out with metrics.statusCodeLabel: false', async () => {
    const gateway = await startGateway(testConfig(upstream.url, { metrics: { statusCodeLabel: false } }))
    await send(gateway.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    const text = await scrape(gateway)
    expect(seriesValue(text, 'v4gw_requests_total', 'tenant="acme",class="native",route="native",status_class="2xx"')).toBe(1)
    expect(text).not.toMatch(/v4gw_requests_total\{[^}]*code=/)
  })

  it('takes metrics.statusCodeLabel from a reload, for the requests after it (SPEC 8: not marked restart)', async () => {
    const gateway = await startGateway(testConfig(upstream.url))
    await send(gateway.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    const without = await gateway.gateway.applyConfig(configSchema.parse(testConfig(upstream.url, { metrics: { statusCodeLabel: false } })))
    expect(without.restartRequired).toEqual([])
    await send(gateway.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    const after = await scrape(gateway)
    // The counter is made again with the other labels: its counts start over, as after a restart.
    expect(seriesValue(after, 'v4gw_requests_total', 'tenant="acme",class="native",route="native",status_class="2xx"')).toBe(1)
    expect(after).not.toMatch(/v4gw_requests_total\{[^}]*code=/)
    await gateway.gateway.applyConfig(configSchema.parse(testConfig(upstream.url)))
    await send(gateway.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    expect(seriesValue(await scrape(gateway), 'v4gw_requests_total', 'tenant="acme",class="native",route="native",status_class="2xx",code="200"')).toBe(1)
  })

  it('says which build and which Node run, as an info metric', async () => {
    const gateway = await startGateway(testConfig(upstream.url))
    const text = await scrape(gateway)
    const { version } = (await import('../../package.json', { with: { type: 'json' } })).default
    expect(seriesValue(text, 'v4gw_build_info', `version="${version}",node_version="${process.versions.node}"`)).toBe(1)
  })

  it('counts requests in flight, and requests shed past limits.maxInFlight by reason', async () => {
    const gateway = await startGateway(testConfig(slow.url, { limits: { maxInFlight: 2 } }))
    const held = [0, 1].map((index) => send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: index } }))
    await until(() => slow.requests.length >= 2)
    expect(await scrape(gateway)).toMatch(/^v4gw_requests_in_flight 2$/m)
    const shed = await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 'over' } })
    expect(shed.status).toBe(503)
    await Promise.all(held)
    const text = await scrape(gateway)
    expect(seriesValue(text, 'v4gw_load_shed_total', 'reason="in_flight"')).toBe(1)
    expect(text).toMatch(/^v4gw_requests_in_flight 0$/m)
  })

  it('counts upstream failures by tenant, upstream and cause: refused, timeout, reset, bad_response', async () => {
    const refused = await startGateway(testConfig(await refusingOrigin()))
    await send(refused.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
    await send(refused.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })
    expect(seriesValue(await scrape(refused), 'v4gw_upstream_failures_total', 'tenant="acme",upstream="v4",cause="refused"')).toBe(2)

    const gateway = await startGateway(testConfig(faults.url, { limits: { upstreamTimeoutMs: 200 } }))
    faults.setHandler(resetConnection)
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(502)
    faults.setHandler((exchange) => {
      exchange.response.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'gzip' })
      exchange.response.end('x')
    })
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(502)
    faults.setHandler(() => {
      // No answer: the gateway's upstream timeout (200 ms) ends the call.
    })
    expect((await send(gateway.url, '/v4/execute', { headers: ALICE, json: { input: 1 } })).status).toBe(504)
    const text = await scrape(gateway)
    expect(seriesValue(text, 'v4gw_upstream_failures_total', 'tenant="acme",upstream="v4",cause="reset"')).toBe(1)
    expect(seriesValue(text, 'v4gw_upstream_failures_total', 'tenant="acme",upstream="v4",cause="bad_response"')).toBe(1)
    expect(seriesValue(text, 'v4gw_upstream_failures_total', 'tenant="acme",upstream="v4",cause="timeout"')).toBe(1)
  })

  it('counts one sessions.start that several requests waited for as one upstream failure', async () => {
    const gateway = await startGateway(testConfig(faults.url))
    // The start is reset once every request has joined it (SPEC 4 step 3: started once per key).
    const allIn = arrivalBarrier(3)
    allIn.watch([gateway])
    faults.setHandler((exchange) => void allIn.arrived.then(() => setTimeout(() => resetConnection(exchange), 50)))
    const startsBefore = faults.exchanges.filter((exchange) => exchange.url === '/v4/sessions.start').length
    const answers = await Promise.all(Array.from({ length: 3 }, () => send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'shared-start' } })))
    expect(answers.map((answer) => answer.status)).toEqual([502, 502, 502])
    expect(faults.exchanges.filter((exchange) => exchange.url === '/v4/sessions.start').length - startsBefore).toBe(1)
    expect(seriesValue(await scrape(gateway), 'v4gw_upstream_failures_total', 'tenant="acme",upstream="v4",cause="reset"')).toBe(1)
    // Each request's access line still names the failure and its cause.
    const ids = answers.map((answer) => answer.headers['x-request-id'])
    await until(() => gateway.logs.lines().filter((line) => line.msg === 'request' && ids.includes(line.requestId as string)).length === 3)
    for (const line of gateway.logs.lines().filter((entry) => entry.msg === 'request' && ids.includes(entry.requestId as string))) {
      expect(line).toMatchObject({ status: 502, error: 'UPSTREAM_UNAVAILABLE', cause: 'reset' })
    }
  })

  it('counts a shared sessions.start that fails after the client of the request that sent it left, once', async () => {
    const gateway = await startGateway(testConfig(faults.url))
    // Both requests' bodies read by the gateway before the first one's client leaves.
    const bothIn = arrivalBarrier(2)
    bothIn.watch([gateway])
    let failStart: (() => void) | undefined
    faults.setHandler((exchange) => {
      failStart = () => resetConnection(exchange)
    })
    const startsBefore = faults.exchanges.filter((exchange) => exchange.url === '/v4/sessions.start').length
    // The request that sends the start, whose client leaves while the start is under way.
    const leaving = new AbortController()
    const sender = request(new URL('/v1/runs/invoke', gateway.url), { method: 'POST', headers: { ...ALICE, 'content-type': 'application/json' }, body: '{"input":1,"stateId":"left-start"}', signal: leaving.signal }).catch(() => undefined)
    await until(() => failStart !== undefined)
    const waiter = send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 2, stateId: 'left-start' } })
    // Both bodies read, and a moment for the waiter to join the start (one start is asserted below).
    await bothIn.arrived
    await new Promise((resolve) => setTimeout(resolve, 50))
    leaving.abort()
    await sender
    await until(() => gateway.logs.lines().some((line) => line.msg === 'request' && line.status === 499))
    failStart?.()
    expect((await waiter).status).toBe(502)
    expect(faults.exchanges.filter((exchange) => exchange.url === '/v4/sessions.start').length - startsBefore).toBe(1)
    expect(seriesValue(await scrape(gateway), 'v4gw_upstream_failures_total', 'tenant="acme",upstream="v4",cause="reset"')).toBe(1)
  })

  it('counts the new sessions.start that requests meeting one stale session share as one upstream failure', async () => {
    const gateway = await startGateway(testConfig(faults.url))
    const startsBefore = faults.exchanges.filter((exchange) => exchange.url === '/v4/sessions.start').length
    let starts = 0
    // The two requests after the stale answers, both in before their shared start is reset.
    const bothIn = arrivalBarrier(2)
    faults.setHandler((exchange) => {
      if (exchange.url === '/v4/sessions.start') {
        starts++
        // The first start maps the key; the one after the stale answers is reset once both requests joined it.
        if (starts === 1) answerJson(exchange, 200, { sessionId: 'stale-one' })
        else void bothIn.arrived.then(() => setTimeout(() => resetConnection(exchange), 50))
        return
      }
      // SPEC 4 step 5: V4 no longer knows the mapped session.
      answerJson(exchange, exchange.url.includes('stale-one') && starts > 1 ? 404 : 200, { output: 'ok' })
    })
    expect((await send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'stale-shared' } })).status).toBe(200)
    starts = 2
    bothIn.watch([gateway])
    const answers = await Promise.all(Array.from({ length: 2 }, () => send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 2, stateId: 'stale-shared' } })))
    expect(answers.map((answer) => answer.status)).toEqual([502, 502])
    // One new start for both requests (SPEC 4 step 3), after the first request's.
    expect(faults.exchanges.filter((exchange) => exchange.url === '/v4/sessions.start').length - startsBefore).toBe(2)
    expect(seriesValue(await scrape(gateway), 'v4gw_upstream_failures_total', 'tenant="acme",upstream="v4",cause="reset"')).toBe(1)
  })
})

describe('SPEC 17 metrics across a reload', () => {
  const dir = useTempDir('v4gw-metrics-reload-')
  const upstream = useRecordingUpstream(answerAfter(0, V4_ANSWER))

  it('removes the series of tenants and legacy routes the reload removed, and keeps the rest', async () => {
    const configPath = join(dir.path, 'gateway.yaml')
    const route = { method: 'POST', path: '/v1/old/run', action: 'execute' }
    const before = testConfig(upstream.url, {
      tenants: {
        acme: { upstream: { staging: upstream.url }, legacy: { routes: [...LEGACY_V1_ROUTES, route] } },
        gone: { upstream: { staging: upstream.url } }
      }
    })
    await writeFile(configPath, stringify(before))
    const gateway = await startGateway(before, { configPath })
    await send(gateway.url, '/v1/old/run', { headers: ALICE, json: { input: 1 } })
    await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })
    await send(gateway.url, '/v4/execute', { headers: { ...ALICE, 'x-tenant-id': 'gone' }, json: { input: 1 } })
    let text = await scrape(gateway)
    expect(text).toContain('route="POST /v1/old/run"')
    expect(text).toContain('tenant="gone"')

    await writeFile(configPath, stringify(testConfig(upstream.url)))
    expect((await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })).json.status).toBe('reloaded')
    text = await scrape(gateway)
    expect(text).not.toContain('route="POST /v1/old/run"')
    expect(text).not.toContain('tenant="gone"')
    expect(seriesValue(text, 'v4gw_requests_total', 'tenant="acme",class="legacy",route="POST /v1/headless/runs",status_class="2xx",code="200"')).toBe(1)
  })
})

describe('SPEC 13 metrics: v4gw_legacy_deprecation_total and v4gw_brownouts_paused', () => {
  const upstream = useRecordingUpstream(answerAfter(0, V4_ANSWER))
  const HOUR = 3_600_000
  const iso = (ms: number): string => new Date(ms).toISOString()

  function deprecatedConfig(url: string): Record<string, unknown> {
    const now = Date.now()
    return testConfig(url, {
      tenants: {
        acme: {
          upstream: { staging: url },
          clients: { key: ['header:x-client-id', 'credential'] },
          legacy: {
            deprecation: {
              date: iso(now - 30 * 24 * HOUR),
              brownouts: { windows: [{ start: iso(now - HOUR), end: iso(now + HOUR) }] },
              exempt: [{ client: 'hdr:contract-42', until: iso(now + 24 * HOUR) }]
            }
          }
        }
      }
    })
  }

  it('counts each action by tenant and route, and shows a pause per tenant while it holds, with promtool content', async () => {
    const gateway = await startGateway(deprecatedConfig(upstream.url))
    const route = 'tenant="acme",route="POST /v1/headless/runs"'
    expect(seriesValue(await scrape(gateway), 'v4gw_brownouts_paused', 'tenant="acme"')).toBe(0)
    expect((await send(gateway.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-client-id': 'contract-42' }, json: { input: 1 } })).status).toBe(200)
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(410)
    const paused = await send(gateway.adminUrl, '/admin/brownouts/pause', { json: { tenant: 'acme', route: 'POST /v1/headless/runs', until: iso(Date.now() + HOUR), reason: 'metrics test' } })
    expect(paused.status).toBe(200)
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(200)
    const text = await scrape(gateway)
    expect(seriesValue(text, 'v4gw_legacy_deprecation_total', `${route},action="exempt"`)).toBe(1)
    expect(seriesValue(text, 'v4gw_legacy_deprecation_total', `${route},action="brownout"`)).toBe(1)
    expect(seriesValue(text, 'v4gw_legacy_deprecation_total', `${route},action="header"`)).toBe(1)
    // A route's pause shows on its tenant's gauge.
    expect(seriesValue(text, 'v4gw_brownouts_paused', 'tenant="acme"')).toBe(1)
    // No metric carries a client id (SPEC 12) or the credential.
    expect(text).not.toContain('contract-42')
    expect(text).not.toContain('demo-token-alice')
    const checked = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
    expect(`${checked.stdout}${checked.stderr}`).toBe('')
    await send(gateway.adminUrl, '/admin/brownouts/pause?tenant=acme&route=POST%20/v1/headless/runs', { method: 'DELETE' })
    expect(seriesValue(await scrape(gateway), 'v4gw_brownouts_paused', 'tenant="acme"')).toBe(0)
  })
})
