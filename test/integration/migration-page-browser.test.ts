import { hash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { send } from '../helpers/http.js'
import { startRecordingUpstream } from '../helpers/recording-upstream.js'
import { startGateway, testConfig, useGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

/** Debian's chromium package (.ci/run installs it); playwright-core brings no browser of its own. */
const CHROMIUM = '/usr/bin/chromium'
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run']

const ADMIN_TOKEN = 'page-admin-token-5f1c2e9a7b'
const DAY = 86_400_000
const NOW = Date.now()
const iso = (ms: number): string => new Date(ms).toISOString()
/** A window three weeks ahead: the page lists it among the next ones. */
const WINDOW_START = iso(NOW + 21 * DAY)
const WINDOW_END = iso(NOW + 21 * DAY + 3_600_000)
/** A user agent is client-controlled text: the page must show it, never parse it. */
const HOSTILE_USER_AGENT = '<img src=x onerror=window.__xss=1>'
const clientIdOf = (token: string): string => `fp:${hash('sha256', token, 'hex').slice(0, 16)}`

/**
 * SPEC 12's migration page in a real browser, against a real gateway that has served legacy
 * traffic: the token prompt, the data as text, the chart, and the token kept out of every URL.
 */
describe('the migration page /admin/ui in chromium', () => {
  const sim = useSimulator()
  const gw = useGateway(() =>
    testConfig(sim.url, {
      admin: { token: ADMIN_TOKEN },
      tenants: {
        acme: {
          // A legacy upstream to roll back to (SPEC 14); nothing in this test is served by it.
          upstream: { staging: sim.url, legacy: sim.url },
          clients: { key: ['header:x-client-id', 'credential'], labels: { 'hdr:billing-batch': { name: 'Billing batch', owner: 'team-billing' } } },
          legacy: {
            deprecation: { date: iso(NOW - 30 * DAY), sunset: iso(NOW + 90 * DAY), brownouts: { windows: [{ start: WINDOW_START, end: WINDOW_END }] } }
          }
        }
      }
    })
  )
  const dir = useTempDir('v4gw-migration-page-')
  let browser: Browser

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium package (apt-get install chromium)`)
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS })
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
  })

  it('asks for the token once, then shows the tenant, its routes, clients as text, a chart and the next brownout window, never putting the token in a URL', { timeout: 60_000 }, async () => {
    const legacyCall = { json: { input: { q: 1 } } }
    const billing = { authorization: 'Bearer demo-token-alice', 'x-client-id': 'billing-batch', 'user-agent': 'billing-batch/2.4' }
    expect((await send(gw.url, '/v1/headless/runs', { ...legacyCall, headers: billing })).status).toBe(200)
    // Seen twice, some milliseconds apart: its first and last seen differ.
    await new Promise((resolve) => setTimeout(resolve, 5))
    expect((await send(gw.url, '/v1/headless/runs', { ...legacyCall, headers: billing })).status).toBe(200)
    expect((await send(gw.url, '/v1/headless/runs', { ...legacyCall, headers: { authorization: 'Bearer demo-token-bob', 'user-agent': HOSTILE_USER_AGENT } })).status).toBe(200)
    expect((await send(gw.url, '/v4/execute', { ...legacyCall, headers: { authorization: 'Bearer demo-token-alice' } })).status).toBe(200)
    // A rollback in force (SPEC 14): the page shows the route's stage from the override, and the override.
    const override = await send(gw.adminUrl, '/admin/migration/stage', {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      json: { tenant: 'acme', route: 'POST /v1/runs/invoke', stage: 'legacy', reason: 'INC-7 rollback <b>now</b>' }
    })
    expect(override.status).toBe(200)

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    const page = await context.newPage()
    const requested: string[] = []
    const problems: string[] = []
    page.on('request', (request) => requested.push(request.url()))
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`))
    page.on('console', (message) => {
      // Chromium logs the 401 that makes the page ask for the token (and a 404 of /admin/shadow
      // on a gateway without it) as failed loads; anything else is a fault.
      if (message.type() === 'error' && !/^Failed to load resource: the server responded with a status of 40[14]\b/.test(message.text())) problems.push(`console: ${message.text()}`)
    })

    await page.goto(`${gw.adminUrl}/admin/ui`)
    await page.locator('#token').waitFor({ state: 'visible' })
    // A wrong token first: refused, and asked again.
    await page.fill('#token', 'not-the-admin-token')
    await page.press('#token', 'Enter')
    await page.locator('#token-message', { hasText: 'refused' }).waitFor()
    await page.fill('#token', ADMIN_TOKEN)
    await page.press('#token', 'Enter')
    const tenant = page.locator('section.tenant', { hasText: 'acme' })
    await tenant.waitFor()

    await expect(tenant.locator('h2').textContent()).resolves.toContain('acme')
    await expect(tenant.textContent()).resolves.toContain('POST /v1/headless/runs')
    // The clients of the one route called, most recently seen first (SPEC 12), as the API lists them.
    const answer = (await send(gw.adminUrl, '/admin/migration?tenant=acme', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json.tenants.acme
    const listed = answer.routes['POST /v1/headless/runs'].clients as { clientId: string; firstSeen: string; lastSeen: string }[]
    expect(await page.locator('.client-id').allTextContents()).toEqual([clientIdOf('demo-token-bob'), 'hdr:billing-batch'])
    expect(listed.map((client) => client.clientId)).toEqual([clientIdOf('demo-token-bob'), 'hdr:billing-batch'])
    const billingRow = page.locator('tr.client', { hasText: 'hdr:billing-batch' })
    await expect(billingRow.textContent()).resolves.toContain('Billing batch')
    // Its "last seen" cell holds its last sighting, not its first.
    const billingSeen = listed[1] as { firstSeen: string; lastSeen: string }
    expect(billingSeen.lastSeen).not.toBe(billingSeen.firstSeen)
    await expect(billingRow.locator('td').nth(2).locator('time').getAttribute('datetime')).resolves.toBe(billingSeen.lastSeen)
    // The chart: an inline SVG, today's bar as tall as its legacy share of the plot (grid lines at 0 and 100 %).
    expect(await page.locator('svg.chart').count()).toBe(1)
    const today = (answer.legacyShare as { legacy: number; native: number }[]).at(-1) as { legacy: number; native: number }
    expect(today).toMatchObject({ legacy: 3, native: 1 })
    const grid = (await page.locator('svg.chart line.grid').evaluateAll((lines) => lines.map((line) => Number(line.getAttribute('y1'))))).sort((a, b) => a - b)
    const [full, zero] = [grid[0] as number, grid.at(-1) as number]
    const bars = await page.locator('svg.chart rect.bar').evaluateAll((rects) => rects.map((rect) => ({ y: Number(rect.getAttribute('y')), height: Number(rect.getAttribute('height')) })))
    expect(bars).toHaveLength(1)
    const bar = bars[0] as { y: number; height: number }
    expect(bar.y + bar.height).toBeCloseTo(zero)
    expect(bar.height / (zero - full)).toBeCloseTo(today.legacy / (today.legacy + today.native))
    await expect(tenant.textContent()).resolves.toContain(WINDOW_START.slice(0, 16).replace('T', ' '))
    // Stages and the override, its reason as text.
    const invokeRow = tenant.locator('tr', { hasText: 'POST /v1/runs/invoke' }).first()
    await expect(invokeRow.textContent()).resolves.toMatch(/legacy\s*override/)
    await expect(tenant.locator('tr', { hasText: 'POST /v1/headless/runs' }).first().textContent()).resolves.toMatch(/translate\s*config/)
    await expect(tenant.textContent()).resolves.toContain('INC-7 rollback <b>now</b>')
    expect(await tenant.locator('b').count()).toBe(0)
    // No route of the tenant is in stage shadow.
    await expect(tenant.textContent()).resolves.toContain('No shadow comparisons.')

    // The policy let the inline style apply (its hash matched), and chromium reported no violation (problems, below).
    expect(await page.evaluate('getComputedStyle(document.querySelector("header")).display')).toBe('flex')

    // The hostile user agent is on the page as text: no element made of it, nothing ran.
    const agents = await page.locator('td.user-agent').allTextContents()
    expect(agents).toContain(HOSTILE_USER_AGENT)
    expect(await page.locator('main img').count()).toBe(0)

    // Asked once: a reload of the tab uses the token kept in sessionStorage, nowhere else.
    await page.reload()
    await page.locator('section.tenant', { hasText: 'acme' }).waitFor()
    expect(await page.locator('#token-form').isHidden()).toBe(true)
    expect(await page.evaluate('sessionStorage.getItem("v4gw.adminToken")')).toBe(ADMIN_TOKEN)
    expect(await page.evaluate('localStorage.length')).toBe(0)
    expect(await context.cookies()).toEqual([])

    expect(requested.filter((url) => url.includes('/admin/migration')).length).toBeGreaterThanOrEqual(3)
    for (const url of requested) {
      expect(url).not.toContain(ADMIN_TOKEN)
      expect(url).not.toContain('not-the-admin-token')
      expect(url.startsWith(gw.adminUrl)).toBe(true)
    }
    expect(problems).toEqual([])

    await page.screenshot({ path: join(dir.path, 'migration-page.png'), fullPage: true })
    await context.close()
  })

  it('marks a day with requests and no legacy one on the chart, and never rounds a small legacy share to 0 %', { timeout: 60_000 }, async () => {
    const shares = await startGateway(testConfig(sim.url, {
      admin: { token: ADMIN_TOKEN },
      tenancy: { header: 'x-tenant-id', default: null },
      tenants: { quiet: { upstream: { staging: sim.url } }, tail: { upstream: { staging: sim.url } } }
    }))
    const native = (tenant: string) => send(shares.url, '/v4/execute', { headers: { authorization: 'Bearer demo-token-alice', 'x-tenant-id': tenant }, json: { input: 1 } })
    expect((await native('quiet')).status).toBe(200)
    // 1 legacy request in 2,101: 0.048 %, which one decimal would show as 0 %.
    expect((await send(shares.url, '/v1/headless/runs', { headers: { authorization: 'Bearer demo-token-alice', 'x-tenant-id': 'tail' }, json: { input: 1 } })).status).toBe(200)
    for (let batch = 0; batch < 21; batch++) {
      const answers = await Promise.all(Array.from({ length: 100 }, () => native('tail')))
      expect(answers.every((answer) => answer.status === 200)).toBe(true)
    }

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
    const page = await context.newPage()
    await page.goto(`${shares.adminUrl}/admin/ui`)
    await page.fill('#token', ADMIN_TOKEN)
    await page.press('#token', 'Enter')
    const quiet = page.locator('section.tenant', { hasText: 'quiet' })
    await quiet.waitFor()
    const zero = quiet.locator('svg.chart rect.bar-zero')
    expect(await zero.count()).toBe(1)
    await expect(zero.locator('title').textContent()).resolves.toMatch(/: 0 % legacy \(0 legacy, 1 native\)$/)
    expect(await quiet.locator('svg.chart rect.bar').count()).toBe(0)
    const tail = page.locator('section.tenant', { hasText: 'tail' })
    await expect(tail.locator('figcaption').textContent()).resolves.toContain(': < 0.1 % legacy, 1 legacy and 2,100 native requests.')
    await context.close()
  })

  it('shows the shadow verdict of a route in stage shadow: its counts and its top differing pointers, as text (SPEC 12, 15)', { timeout: 60_000 }, async () => {
    const answer = (text: string) => JSON.stringify({ output: { text }, effective: { policy: 'p', route: 'r', risk: 'low' }, meta: { requestId: 'x' } })
    const reply = (text: string) => startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(answer(text))
    })
    const [v4, legacy] = [await reply('from V4'), await reply('from the legacy side')]
    const shadowed = await startGateway(testConfig(v4.url, { admin: { token: ADMIN_TOKEN }, tenants: { acme: { upstream: { staging: v4.url, legacy: legacy.url }, migration: { stage: 'shadow' } } } }))
    for (let call = 0; call < 3; call++) {
      expect((await send(shadowed.url, '/v1/headless/runs', { headers: { authorization: 'Bearer sess_page_shadow_1' }, json: { input: call } })).status).toBe(200)
    }
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }
    await until(async () => (await send(shadowed.adminUrl, '/admin/shadow?tenant=acme', { headers: admin })).json?.tenants?.acme?.['POST /v1/headless/runs']?.mismatches === 3)

    const context = await browser.newContext({ viewport: { width: 1600, height: 900 } })
    const page = await context.newPage()
    await page.goto(`${shadowed.adminUrl}/admin/ui`)
    await page.fill('#token', ADMIN_TOKEN)
    await page.press('#token', 'Enter')
    const tenant = page.locator('section.tenant', { hasText: 'acme' })
    await tenant.waitFor()
    const row = tenant.locator('tr', { hasText: 'POST /v1/headless/runs' }).filter({ hasText: 'mismatch' })
    await row.waitFor()
    const cells = (await row.locator('td').allTextContents()).map((text) => text.trim())
    // Verdict, last 24 h, comparisons, matches, mismatches, …, the pointers that differed.
    expect(cells[0]).toMatch(/^100(\.0)?\s?% mismatch$/)
    expect(cells.slice(2, 5)).toEqual(['3', '0', '3'])
    expect(cells.at(-1)).toBe('/output/text ×3')
    await expect(tenant.textContent()).resolves.not.toContain('No shadow comparisons.')
    await context.close()
  })

  it('shows a shadow route whose requests were all skipped, with its counts, not "No shadow comparisons."', { timeout: 60_000 }, async () => {
    // Bodies over shadow.maxBodyBytes are not compared (SPEC 15: skipped).
    const legacy = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ output: 'legacy', meta: { requestId: 'x' } }))
    })
    const skipping = await startGateway(testConfig(sim.url, { admin: { token: ADMIN_TOKEN }, tenants: { acme: { upstream: { staging: sim.url, legacy: legacy.url }, migration: { stage: 'shadow', shadow: { maxBodyBytes: 10 } } } } }))
    for (let call = 0; call < 2; call++) {
      expect((await send(skipping.url, '/v1/headless/runs', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: `a body over ten bytes ${call}` } })).status).toBe(200)
    }
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }
    await until(async () => (await send(skipping.adminUrl, '/admin/shadow?tenant=acme', { headers: admin })).json?.tenants?.acme?.['POST /v1/headless/runs']?.skipped === 2)
    const context = await browser.newContext({ viewport: { width: 1600, height: 900 } })
    const page = await context.newPage()
    await page.goto(`${skipping.adminUrl}/admin/ui`)
    await page.fill('#token', ADMIN_TOKEN)
    await page.press('#token', 'Enter')
    const tenant = page.locator('section.tenant', { hasText: 'acme' })
    await tenant.waitFor()
    const row = tenant.locator('tr', { hasText: 'POST /v1/headless/runs' }).filter({ hasText: 'nothing compared' })
    await row.waitFor()
    const cells = (await row.locator('td').allTextContents()).map((text) => text.trim())
    // …, dropped, skipped, pointers.
    expect(cells.at(-2)).toBe('2')
    await expect(tenant.textContent()).resolves.not.toContain('No shadow comparisons.')
    await context.close()
  })

  /**
   * A page showing the tenant, whose next /admin/migration answers are held in the browser until
   * `release` (the gateway has answered; a slow network is what is played).
   */
  async function pageWithHeldAnswers(): Promise<{ context: BrowserContext; page: Page; release: () => void }> {
    const context = await browser.newContext()
    const page = await context.newPage()
    await page.goto(`${gw.adminUrl}/admin/ui`)
    await page.fill('#token', ADMIN_TOKEN)
    await page.press('#token', 'Enter')
    await page.locator('section.tenant', { hasText: 'acme' }).waitFor()
    let release: () => void = () => {}
    const released = new Promise<void>((resolve) => (release = resolve))
    await page.route('**/admin/migration', async (route) => {
      const answer = await route.fetch()
      await released
      await route.fulfill({ response: answer })
    })
    return { context, page, release }
  }

  it('shows no answer to a load sent with a token forgotten since (it came back after the forget)', { timeout: 60_000 }, async () => {
    const { context, page, release } = await pageWithHeldAnswers()
    await page.click('#refresh')
    await page.click('#forget')
    await page.locator('#token').waitFor({ state: 'visible' })
    const answered = page.waitForResponse((response) => new URL(response.url()).pathname === '/admin/migration')
    release()
    // The held 200 arrives (and the page's handlers of it run): the page stays on the token form, showing no tenant.
    await answered
    await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 50)))
    expect(await page.locator('#token').isVisible()).toBe(true)
    expect(await page.locator('section.tenant').count()).toBe(0)
    await context.close()
  })

  it('shows the answer to the token given again after a forget, while the load sent before is still out', { timeout: 60_000 }, async () => {
    const { context, page, release } = await pageWithHeldAnswers()
    await page.click('#refresh')
    await page.click('#forget')
    await page.fill('#token', ADMIN_TOKEN)
    await page.press('#token', 'Enter')
    release()
    // The load made with the token given again answers (the one before the forget is not shown).
    await page.locator('section.tenant', { hasText: 'acme' }).waitFor()
    await context.close()
  })

  it('says, when a refresh fails, that what it still shows is the earlier answer and how old it is', { timeout: 60_000 }, async () => {
    const going = await startGateway(testConfig(sim.url, { admin: { token: ADMIN_TOKEN } }))
    const context = await browser.newContext()
    const page = await context.newPage()
    await page.goto(`${going.adminUrl}/admin/ui`)
    await page.fill('#token', ADMIN_TOKEN)
    await page.press('#token', 'Enter')
    await page.locator('section.tenant', { hasText: 'acme' }).waitFor()
    const generated = (await page.locator('#status').textContent()) ?? ''
    expect(generated).toMatch(/^Generated \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC/)
    // The gateway goes: the refresh reaches nothing.
    await going.close()
    await page.click('#refresh')
    await page.locator('#status', { hasText: 'could not be reached' }).waitFor()
    const status = (await page.locator('#status').textContent()) ?? ''
    expect(status).toContain(`still showing the answer generated ${generated.slice('Generated '.length, 'Generated '.length + 20)}`)
    expect(await page.locator('section.tenant', { hasText: 'acme' }).count()).toBe(1)
    await context.close()
  })

  it('never says "no client has called" a route whose clients were evicted but which has requests', { timeout: 60_000 }, async () => {
    // One client record in all: the invoke route's client is evicted by the next route's.
    const evicting = await startGateway(testConfig(sim.url, { admin: { token: ADMIN_TOKEN }, clients: { maxTotal: 1 } }))
    await send(evicting.url, '/v1/runs/invoke', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: 1, stateId: 's' } })
    await send(evicting.url, '/v1/headless/runs', { headers: { authorization: 'Bearer demo-token-bob' }, json: { input: 1 } })
    const context = await browser.newContext()
    const page = await context.newPage()
    await page.goto(`${evicting.adminUrl}/admin/ui`)
    await page.fill('#token', ADMIN_TOKEN)
    await page.press('#token', 'Enter')
    const invoke = page.locator('details.clients', { hasText: 'POST /v1/runs/invoke' })
    await invoke.waitFor({ state: 'attached' })
    const text = (await invoke.textContent()) ?? ''
    expect(text).toContain('No client is listed, yet the route has 1 request(s)')
    expect(text).not.toContain('No client has called this route')
    // A route nobody called still says so.
    const unused = page.locator('details.clients', { hasText: 'POST /v1/runs/:runId/invoke' })
    await expect(unused.textContent()).resolves.toContain('No client has called this route')
    await context.close()
  })

  it('shows, as text, a pause whose route a reload removed: not applied, and why (SPEC 13, 14)', { timeout: 60_000 }, async () => {
    const routes = [{ method: 'POST', path: '/v1/headless/runs', action: 'execute' }, { method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/stateId' }]
    const config = (withInvoke: boolean) => testConfig(sim.url, { admin: { token: ADMIN_TOKEN }, tenants: { acme: { upstream: { staging: sim.url }, legacy: { routes: withInvoke ? routes : routes.slice(0, 1) } } } })
    const configPath = join(dir.path, 'reloaded.yaml')
    await writeFile(configPath, stringify(config(true)))
    const reloaded = await startGateway(config(true), { configPath })
    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }
    const paused = await send(reloaded.adminUrl, '/admin/brownouts/pause', { headers: admin, json: { tenant: 'acme', route: 'POST /v1/runs/invoke', until: iso(Date.now() + DAY), reason: 'partner freeze <i>x</i>' } })
    expect(paused.status).toBe(200)
    await writeFile(configPath, stringify(config(false)))
    expect((await send(reloaded.adminUrl, '/admin/reload', { method: 'POST', headers: admin })).status).toBe(200)

    const context = await browser.newContext()
    const page = await context.newPage()
    await page.goto(`${reloaded.adminUrl}/admin/ui`)
    await page.fill('#token', ADMIN_TOKEN)
    await page.press('#token', 'Enter')
    const suspended = page.locator('section.suspended')
    await suspended.waitFor()
    const row = suspended.locator('tr', { hasText: 'POST /v1/runs/invoke' })
    await expect(row.textContent()).resolves.toContain('the route is not in the running config')
    await expect(row.textContent()).resolves.toContain('partner freeze <i>x</i>')
    expect(await suspended.locator('i').count()).toBe(0)
    expect(await page.locator('#tenant-nav a[href="#suspended"]').count()).toBe(1)
    await context.close()
  })
})
