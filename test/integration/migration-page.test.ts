import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'

const ADMIN_TOKEN = 'admin-token-of-the-page-suite-0123'

/** The text of every `<tag>…</tag>` in a page, exactly as served. */
function contentsOf(html: string, tag: 'script' | 'style'): string[] {
  return [...html.matchAll(new RegExp(`<${tag}(\\s[^>]*)?>([\\s\\S]*?)</${tag}>`, 'g'))].map((match) => match[2] ?? '')
}

function sha256Source(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`
}

/** `default-src 'none'; script-src 'sha256-…'` as a map of directive to its sources. */
function parsePolicy(policy: string): Map<string, string[]> {
  return new Map(
    policy
      .split(';')
      .map((directive) => directive.trim().split(/\s+/))
      .filter((words) => words[0] !== '')
      .map(([name, ...sources]) => [name!.toLowerCase(), sources])
  )
}

/** SPEC 12: the migration page, `GET /admin/ui`, as served (the browser test drives it). */
describe('the migration page GET /admin/ui', () => {
  const gw = useGateway(() => testConfig('http://127.0.0.1:9', { admin: { token: ADMIN_TOKEN } }))

  it('is served without the admin token as UTF-8 HTML with nosniff, while /admin/migration still needs the token', async () => {
    const page = await send(gw.adminUrl, '/admin/ui')
    expect(page.status).toBe(200)
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8')
    expect(page.headers['x-content-type-options']).toBe('nosniff')
    expect(page.text).toMatch(/^<!doctype html>/)
    expect((await send(gw.adminUrl, '/admin/migration')).json.error.code).toBe('AUTH_INVALID')
  })

  it('shows how to point the gateway at an OpenTelemetry collector, with a tracing section the config accepts (SPEC 17)', async () => {
    const page = await send(gw.adminUrl, '/admin/ui')
    const snippet = /<pre><code>(tracing:[\s\S]*?)<\/code><\/pre>/.exec(page.text)?.[1]
    expect(snippet).toBeDefined()
    const { configSchema } = await import('../../src/config/schema.js')
    const { parse } = await import('yaml')
    const parsed = configSchema.parse(testConfig('http://127.0.0.1:9', parse(snippet as string) as Record<string, unknown>))
    expect(parsed.tracing).toMatchObject({ enabled: true, endpoint: 'http://otel-collector:4318/v1/traces', sampleRatio: 0.01 })
  })

  it('answers HEAD /admin/ui without the token and without a body', async () => {
    const head = await send(gw.adminUrl, '/admin/ui', { method: 'HEAD' })
    expect(head.status).toBe(200)
    expect(head.text).toBe('')
    expect(head.headers['content-security-policy']).toBeDefined()
  })

  it("sends SPEC 12's Content-Security-Policy whose hashes are those of the served inline script and style", async () => {
    const page = await send(gw.adminUrl, '/admin/ui')
    const policy = parsePolicy(String(page.headers['content-security-policy']))
    const scripts = contentsOf(page.text, 'script')
    const styles = contentsOf(page.text, 'style')
    expect(scripts).toHaveLength(1)
    expect(styles).toHaveLength(1)
    expect(policy.get('default-src')).toEqual(["'none'"])
    expect(policy.get('script-src')).toEqual([sha256Source(scripts[0]!)])
    expect(policy.get('style-src')).toEqual([sha256Source(styles[0]!)])
    expect(policy.get('connect-src')).toEqual(["'self'"])
    expect(policy.get('img-src')).toEqual(['data:'])
    expect(policy.get('frame-ancestors')).toEqual(["'none'"])
    // A form that posted without its script would put the token in a URL: no form goes anywhere.
    expect(policy.get('form-action')).toEqual(["'none'"])
    expect(policy.get('base-uri')).toEqual(["'none'"])
  })

  it('names no external URL, no inline handler and no style attribute: the hashes are all that runs or styles it', async () => {
    const { text } = await send(gw.adminUrl, '/admin/ui')
    expect(text).not.toMatch(/\b(?:src|href|action|srcset|poster)\s*=\s*["']?\s*(?:https?:)?\/\//i)
    expect(text).not.toMatch(/\burl\(/i)
    expect(text).not.toMatch(/@import/i)
    expect(text).not.toMatch(/<[a-z][^>]*\son[a-z]+\s*=/i)
    expect(text).not.toMatch(/<[a-z][^>]*\sstyle\s*=/i)
    // Data reaches the page as text: the script builds no markup from strings.
    expect(text).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/)
    expect(text).not.toContain('localStorage')
    expect(text).not.toContain('document.cookie')
  })

  it('answers 403 FORBIDDEN for a Host that does not name the listener, as every /admin/* call (SPEC 18)', async () => {
    const answer = await send(gw.adminUrl, '/admin/ui', { headers: { host: 'rebound.attacker.example' } })
    expect(answer.status).toBe(403)
    expect(answer.json.error.code).toBe('FORBIDDEN')
  })

  it('still asks the token of the endpoints beside it: an unknown /admin/ui/x is 401, not 404', async () => {
    expect((await send(gw.adminUrl, '/admin/ui/x')).json.error.code).toBe('AUTH_INVALID')
    expect((await send(gw.adminUrl, '/admin/ui/x', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(404)
  })
})
