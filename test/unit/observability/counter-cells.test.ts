import { Counter, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { CounterCells } from '../../../src/observability/counter-cells.js'
import { createMetrics, type RequestSample } from '../../../src/observability/metrics.js'
import { seededRandom } from '../../helpers/seeded-random.js'

const LABELS = ['tenant', 'route', 'code'] as const
type Label = (typeof LABELS)[number]

/** The same counter twice: one counted in cells (read through its collect), one by prom-client's own `inc` per call. */
function pair(): { cells: CounterCells<Label>; batched: Registry; direct: Registry; plain: Counter<Label> } {
  const cells = new CounterCells(LABELS)
  const batched = new Registry()
  const direct = new Registry()
  new Counter({
    name: 'x_total',
    help: 'h',
    labelNames: LABELS,
    registers: [batched],
    collect() {
      cells.flush(this)
    }
  })
  const plain = new Counter({ name: 'x_total', help: 'h', labelNames: LABELS, registers: [direct] })
  return { cells, batched, direct, plain }
}

// Label values as a config and a request can give them: empty, quoted, escaped, a newline.
const VALUES = ['', 'acme', 'beta', 'a"b', 'back\\slash', 'new\nline', 'POST /v1/headless/runs', 'native', '200', '404']

describe('CounterCells', () => {
  it('a scrape shows what prom-client’s own inc per call shows, with scrapes between the counts', async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const { cells, batched, direct, plain } = pair()
      const next = seededRandom(seed)
      const pick = (): string => VALUES[Math.floor(next() * VALUES.length)] as string
      for (let step = 0; step < 2_000; step++) {
        const values = [pick(), pick(), pick()]
        const by = next() < 0.1 ? 1 + Math.floor(next() * 5) : 1
        cells.add(values, by)
        plain.inc({ tenant: values[0] as string, route: values[1] as string, code: values[2] as string }, by)
        if (next() < 0.01) expect(await batched.metrics()).toBe(await direct.metrics())
      }
      expect(await batched.metrics()).toBe(await direct.metrics())
    }
  })

  it('counts nothing twice: a second read without new counts shows the same totals', async () => {
    const { cells, batched } = pair()
    cells.add(['acme', 'r', '200'])
    cells.add(['acme', 'r', '200'])
    const first = await batched.metrics()
    expect(first).toContain('x_total{tenant="acme",route="r",code="200"} 2')
    expect(await batched.metrics()).toBe(first)
  })

  it('retain forgets the series the counter removed; a series counted again afterwards starts from zero, as prom-client’s does', async () => {
    const { cells, batched, direct, plain } = pair()
    for (const [tenant, count] of [['acme', 3], ['gone', 2]] as const) {
      for (let index = 0; index < count; index++) {
        cells.add([tenant, 'r', '200'])
        plain.inc({ tenant, route: 'r', code: '200' })
      }
    }
    const counter = batched.getSingleMetric('x_total') as Counter<Label>
    await counter.get()
    counter.remove({ tenant: 'gone', route: 'r', code: '200' })
    plain.remove({ tenant: 'gone', route: 'r', code: '200' })
    expect(cells.series).toBe(2)
    cells.retain((labels) => labels.tenant !== 'gone')
    expect(cells.series).toBe(1)
    expect(await batched.metrics()).toBe(await direct.metrics())
    expect(await batched.metrics()).not.toContain('gone')
    cells.add(['gone', 'r', '200'])
    plain.inc({ tenant: 'gone', route: 'r', code: '200' })
    cells.add(['acme', 'r', '200'])
    plain.inc({ tenant: 'acme', route: 'r', code: '200' })
    expect(await batched.metrics()).toBe(await direct.metrics())
    expect(await batched.metrics()).toContain('x_total{tenant="gone",route="r",code="200"} 1')
    // A kept series is found again by its own values, not counted in a second cell.
    expect(cells.series).toBe(2)
  })

  it('keeps the counts not read yet of the series it keeps', async () => {
    const { cells, batched, direct, plain } = pair()
    for (const tenant of ['acme', 'acme', 'gone']) {
      cells.add([tenant, 'r', '200'])
      if (tenant !== 'gone') plain.inc({ tenant, route: 'r', code: '200' })
    }
    cells.retain((labels) => labels.tenant !== 'gone')
    expect(await batched.metrics()).toBe(await direct.metrics())
    expect(await batched.metrics()).toContain('x_total{tenant="acme",route="r",code="200"} 2')
  })

  it('refuses to add nothing, less than nothing or not a number (a counter only goes up)', () => {
    const { cells } = pair()
    for (const by of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => cells.add(['acme', 'r', '200'], by)).toThrow(RangeError)
    expect(cells.series).toBe(0)
  })

  it('takes a number for its decimal text, and an array filled again for every call', async () => {
    const { cells, batched, direct, plain } = pair()
    const values: (string | number)[] = ['', '', 0]
    for (const [tenant, code] of [['acme', 200], ['acme', 404], ['beta', 200], ['acme', 200]] as const) {
      values[0] = tenant
      values[1] = 'r'
      values[2] = code
      cells.add(values)
      plain.inc({ tenant, route: 'r', code: String(code) })
    }
    expect(cells.series).toBe(3)
    expect(await batched.metrics()).toBe(await direct.metrics())
    cells.retain(() => true)
    values[0] = 'acme'
    values[2] = 404
    cells.add(values)
    plain.inc({ tenant: 'acme', route: 'r', code: '404' })
    expect(cells.series).toBe(3)
    expect(await batched.metrics()).toBe(await direct.metrics())
  })
})

describe('the request metrics counted in cells (metrics.ts)', () => {
  const sample = (over: Partial<RequestSample>): RequestSample => ({ tenant: 'acme', trafficClass: 'legacy', route: 'POST /v1/headless/runs', statusCode: 200, durationMs: 3, upstreamMs: 2, errorCode: undefined, ...over })

  it('v4gw_requests_total, the per-route counters and the latency histograms read as the requests went, and a reload’s removed series go', async () => {
    const metrics = createMetrics({ sessionEntries: () => 0, processMetrics: false })
    metrics.observeRequest(sample({ servedBy: 'v4', deprecationAction: 'header', idempotencyOutcome: 'executed' }))
    metrics.observeRequest(sample({ statusCode: 410, deprecationAction: 'brownout', servedBy: 'gateway', upstreamMs: undefined }))
    metrics.observeRequest(sample({ tenant: 'old', route: 'POST /v1/old' }))
    metrics.observeRequest(sample({ trafficClass: 'native', route: undefined, upstreamMs: 1 }))
    let text = await metrics.registry.metrics()
    expect(text).toContain('v4gw_requests_total{tenant="acme",class="legacy",route="POST /v1/headless/runs",status_class="2xx",code="200"} 1')
    expect(text).toContain('v4gw_requests_total{tenant="acme",class="legacy",route="POST /v1/headless/runs",status_class="4xx",code="410"} 1')
    expect(text).toContain('v4gw_requests_total{tenant="acme",class="native",route="native",status_class="2xx",code="200"} 1')
    expect(text).toContain('v4gw_legacy_deprecation_total{tenant="acme",route="POST /v1/headless/runs",action="brownout"} 1')
    expect(text).toContain('v4gw_idempotency_total{tenant="acme",route="POST /v1/headless/runs",outcome="executed"} 1')
    expect(text).toContain('v4gw_legacy_requests_total{tenant="acme",route="POST /v1/headless/runs",served_by="gateway"} 1')
    expect(text).toContain('v4gw_request_duration_seconds_count{class="legacy"} 3')
    expect(text).toContain('v4gw_upstream_duration_seconds_count{class="legacy"} 2')
    expect(text).toContain('v4gw_upstream_duration_seconds_count{class="native"} 1')
    // Refused before a tenant was known: its series has no tenant and stays whatever a reload keeps.
    metrics.observeRequest(sample({ tenant: undefined, trafficClass: 'unknown', route: undefined, statusCode: 404, upstreamMs: undefined }))
    await metrics.retain((tenant) => tenant === 'acme')
    metrics.observeRequest(sample({}))
    text = await metrics.registry.metrics()
    expect(text).not.toContain('tenant="old"')
    expect(text).toContain('v4gw_requests_total{tenant="",class="unknown",route="",status_class="4xx",code="404"} 1')
    expect(text).toContain('v4gw_requests_total{tenant="acme",class="legacy",route="POST /v1/headless/runs",status_class="2xx",code="200"} 2')
  })

  it('without the code label (metrics.statusCodeLabel: false) counts by status class alone', async () => {
    const metrics = createMetrics({ sessionEntries: () => 0, processMetrics: false, statusCodeLabel: false })
    metrics.observeRequest(sample({ statusCode: 200 }))
    metrics.observeRequest(sample({ statusCode: 201 }))
    const text = await metrics.registry.metrics()
    expect(text).toContain('v4gw_requests_total{tenant="acme",class="legacy",route="POST /v1/headless/runs",status_class="2xx"} 2')
    expect(text).not.toContain('code=')
  })
})
