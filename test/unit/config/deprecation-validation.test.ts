import { describe, expect, it } from 'vitest'
import { effectiveDeprecation } from '../../../src/config/deprecation.js'
import { loadConfig } from '../../../src/config/load-config.js'
import { configProblems } from '../../helpers/config-files.js'
import { useTempDir } from '../../helpers/temp-dir.js'

const dir = useTempDir('v4gw-deprecation-')
let fileCount = 0
const DAY = 24 * 3_600_000
const NOW = Date.now()
const iso = (ms: number): string => new Date(ms).toISOString()

function tenantWith(deprecation: unknown, migration?: unknown): Record<string, unknown> {
  return { tenants: { acme: { upstream: { staging: 'http://127.0.0.1:4010' }, legacy: { deprecation }, ...(migration === undefined ? {} : { migration }) } } }
}

async function problemsOf(document: Record<string, unknown>): Promise<string[]> {
  return configProblems(await dir.write(`config-${++fileCount}.json`, JSON.stringify(document)))
}

const DATE = iso(NOW + 10 * DAY)
const SUNSET = iso(NOW + 100 * DAY)
const window = (startDays: number, endDays: number) => ({ start: iso(NOW + startDays * DAY), end: iso(NOW + endDays * DAY) })

describe('deprecation validation at load (SPEC 13)', () => {
  it('accepts a deprecation with windows, a ladder, a percentage and an exemption, with their defaults', async () => {
    const path = await dir.write(`config-${++fileCount}.json`, JSON.stringify(tenantWith({
      date: DATE,
      sunset: SUNSET,
      brownouts: { windows: [window(30, 31)], escalation: { first: iso(NOW + 40 * DAY), everyMs: 7 * DAY, durationsMs: [3_600_000, 14_400_000] }, clients: 12.5 },
      exempt: [{ client: 'fp:0123456789abcdef', until: SUNSET }]
    })))
    const deprecation = (await loadConfig(path, {})).tenants.acme?.legacy.deprecation
    expect(deprecation).toMatchObject({ successor: true, afterSunset: 'serve', brownouts: { minNoticeMs: 14 * DAY, clients: 12.5 } })
  })

  it('merges a route\'s deprecation over the tenant\'s one level deep: a route\'s brownouts replace the tenant\'s whole (SPEC 14)', async () => {
    const path = await dir.write(`config-${++fileCount}.json`, JSON.stringify(tenantWith(
      { date: DATE, sunset: SUNSET, brownouts: { windows: [window(30, 31)], clients: 10, minNoticeMs: 0 } },
      { routes: { 'POST /v1/runs/invoke': { deprecation: { sunset: iso(NOW + 200 * DAY), brownouts: { windows: [window(40, 41)] } } } } }
    )))
    const tenant = (await loadConfig(path, {})).tenants.acme
    if (tenant === undefined) throw new Error('no tenant')
    const merged = effectiveDeprecation(tenant.legacy.deprecation, tenant.migration.routes['POST /v1/runs/invoke']?.deprecation)
    // date and link from the tenant, sunset from the route; brownouts the route's, with the schema's defaults, not the tenant's 10 %.
    expect(merged).toMatchObject({ date: DATE, sunset: iso(NOW + 200 * DAY), brownouts: { windows: [window(40, 41)], clients: 100, minNoticeMs: 14 * DAY, escalation: null } })
  })

  it('names each problem with its path', async () => {
    const problems = await problemsOf(tenantWith({
      date: DATE,
      sunset: iso(NOW + 5 * DAY),
      afterSunset: 'gone',
      brownouts: { windows: [window(12, 13), window(20, 19)], clients: 100.5, escalation: { first: iso(NOW + 40 * DAY), everyMs: DAY, durationsMs: [] } },
      exempt: [{ client: 'someone', until: SUNSET }]
    }))
    expect(problems).toEqual(expect.arrayContaining([
      expect.stringMatching(/^tenants\.acme\.legacy\.deprecation\.brownouts\.clients: /),
      expect.stringMatching(/^tenants\.acme\.legacy\.deprecation\.brownouts\.escalation\.durationsMs: .*at least one/),
      expect.stringMatching(/^tenants\.acme\.legacy\.deprecation\.exempt\.0\.client: expected a client id/)
    ]))
  })

  it('refuses a sunset before the date, gone without a sunset, short notice, a window past the sunset, one ending before it starts, and overlaps', async () => {
    expect(await problemsOf(tenantWith({ date: DATE, sunset: iso(NOW + 5 * DAY) }))).toEqual(['tenants.acme.legacy.deprecation.sunset: sunset must be after date'])
    expect(await problemsOf(tenantWith({ date: DATE, afterSunset: 'gone' }))).toEqual(['tenants.acme.legacy.deprecation.afterSunset: afterSunset: gone needs a sunset'])
    const problems = await problemsOf(tenantWith({
      date: DATE,
      sunset: SUNSET,
      brownouts: { windows: [window(12, 13), window(50, 49), window(99, 101), window(60, 62)], escalation: { first: iso(NOW + 61 * DAY), everyMs: DAY, durationsMs: [3_600_000] } }
    }))
    expect(problems).toEqual(expect.arrayContaining([
      expect.stringMatching(/^tenants\.acme\.legacy\.deprecation\.brownouts\.windows\.0: starts .* before date \+ minNoticeMs/),
      'tenants.acme.legacy.deprecation.brownouts.windows.1: a window starts before it ends',
      expect.stringMatching(/^tenants\.acme\.legacy\.deprecation\.brownouts\.windows\.2: ends .* after the sunset/),
      'tenants.acme.legacy.deprecation.brownouts.escalation.0: overlaps the window of brownouts.windows.3'
    ]))
    expect(problems).toHaveLength(4)
  })

  it('refuses a window that ends past the last instant a date can hold, with or without a sunset, and a notice that long', async () => {
    const ladder = { first: iso(NOW + 40 * DAY), everyMs: 7 * DAY, durationsMs: [3_600_000, 9_000_000_000_000_000] }
    const beyond = 'tenants.acme.legacy.deprecation.brownouts.escalation.1: a window must end by +275760-09-13T00:00:00.000Z, the last instant a date can hold'
    expect(await problemsOf(tenantWith({ date: DATE, brownouts: { escalation: ladder } }))).toEqual([beyond])
    expect(await problemsOf(tenantWith({ date: DATE, sunset: SUNSET, brownouts: { escalation: ladder } }))).toEqual([beyond])
    expect(await problemsOf(tenantWith({ date: DATE, brownouts: { windows: [window(30, 31)], minNoticeMs: 9_000_000_000_000_000 } }))).toEqual([
      expect.stringMatching(/^tenants\.acme\.legacy\.deprecation\.brownouts\.windows\.0: starts .*, before date \+ minNoticeMs \(after \+275760-09-13T00:00:00\.000Z\)/)
    ])
  })

  it('allows short notice with minNoticeMs: 0', async () => {
    const path = await dir.write(`config-${++fileCount}.json`, JSON.stringify(tenantWith({ date: DATE, brownouts: { windows: [window(11, 12)], minNoticeMs: 0 } })))
    await expect(loadConfig(path, {})).resolves.toBeDefined()
  })

  it('refuses a migration.routes key that is not a route of the table, and a route deprecation with no date to be had', async () => {
    const problems = await problemsOf(tenantWith(null, { routes: { 'POST /v1/nope': { deprecation: null }, 'POST /v1/headless/runs': { deprecation: { sunset: SUNSET } } } }))
    expect(problems).toEqual([
      expect.stringMatching(/^tenants\.acme\.migration\.routes\.POST \/v1\/nope: not a route of this tenant's table/),
      'tenants.acme.migration.routes.POST /v1/headless/runs.deprecation.date: date is required: the tenant sets no deprecation for this one to merge over'
    ])
  })

  it('checks a route\'s merged deprecation with the route\'s path', async () => {
    const problems = await problemsOf(tenantWith({ date: DATE, sunset: SUNSET }, { routes: { 'POST /v1/runs/invoke': { deprecation: { brownouts: { windows: [window(11, 12)] } } } } }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.migration\.routes\.POST \/v1\/runs\/invoke\.deprecation\.brownouts\.windows\.0: starts /)])
  })
})
