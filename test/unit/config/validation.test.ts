import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../../src/config/load-config.js'
import type { GatewayConfig } from '../../../src/config/schema.js'
import { configProblems } from '../../helpers/config-files.js'
import { useTempDir } from '../../helpers/temp-dir.js'

const dir = useTempDir('v4gw-validation-')
let fileCount = 0

/** Writes `document` to a fresh temp JSON file, so the test reads as the config it means; resolves with its path. */
function writeJson(document: Record<string, unknown>): Promise<string> {
  return dir.write(`config-${++fileCount}.json`, JSON.stringify(document))
}

async function load(document: Record<string, unknown>): Promise<GatewayConfig> {
  return loadConfig(await writeJson(document), {})
}

/** The `problems` of the CONFIG_INVALID error that loading `document` rejects with. */
async function problemsOf(document: Record<string, unknown>): Promise<string[]> {
  return configProblems(await writeJson(document))
}

function acme(upstream: Record<string, unknown>, rest: Record<string, unknown> = {}): Record<string, unknown> {
  return { tenants: { acme: { upstream, ...rest } } }
}

function withRoutes(routes: unknown[]): Record<string, unknown> {
  return acme({ staging: 'http://127.0.0.1:4010' }, { legacy: { routes } })
}

describe('upstream URLs', () => {
  it('reports tenants.acme.upstream.staging: Invalid URL for a value that is not a URL', async () => {
    const problems = await problemsOf(acme({ staging: 'not a url' }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: Invalid URL/)])
  })

  it('reports tenants.acme.upstream.staging: Invalid URL for a URL that is not http(s)', async () => {
    const problems = await problemsOf(acme({ staging: 'ftp://files.example:21' }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: Invalid URL/)])
  })

  it('reports tenants.acme.upstream.production: Invalid URL for a production value that is not a URL', async () => {
    const problems = await problemsOf(acme({ staging: 'http://127.0.0.1:4010', production: '::nope::' }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.production: Invalid URL/)])
  })

  it('refuses an upstream URL that carries credentials', async () => {
    const problems = await problemsOf(acme({ staging: 'http://user:secret@127.0.0.1:4010' }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: /)])
  })

  it('refuses an upstream URL that carries a query', async () => {
    const problems = await problemsOf(acme({ staging: 'http://127.0.0.1:4010?x=1' }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: /)])
  })

  it('refuses an upstream URL with a path, which requests would not keep', async () => {
    for (const staging of ['http://127.0.0.1:4010/api', 'http://127.0.0.1:4010/api/', 'https://v4.example.com/v4']) {
      const problems = await problemsOf(acme({ staging }))
      expect(problems, staging).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: .*origin/)])
    }
    const config = await load(acme({ staging: 'http://127.0.0.1:4010/' }))
    expect(config.tenants.acme?.upstream.staging).toBe('http://127.0.0.1:4010/')
  })

  it('accepts embedded as an upstream', async () => {
    const config = await load(acme({ staging: 'embedded' }))
    expect(config.tenants.acme?.upstream.staging).toBe('embedded')
  })

  it('refuses target production when no production upstream is set', async () => {
    const problems = await problemsOf(acme({ staging: 'http://127.0.0.1:4010', target: 'production' }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream(\.production|\.target)?: .*production/)])
  })

  it('accepts target production with a production upstream', async () => {
    const config = await load(acme({ staging: 'http://127.0.0.1:4010', production: 'https://v4.example.com', target: 'production' }))
    expect(config.tenants.acme?.upstream).toEqual({ staging: 'http://127.0.0.1:4010', production: 'https://v4.example.com', target: 'production' })
  })

  it('refuses a target that is neither staging nor production', async () => {
    const problems = await problemsOf(acme({ staging: 'http://127.0.0.1:4010', target: 'prod' }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.target: /)])
  })

  it('refuses a config without tenants', async () => {
    const problems = await problemsOf({ listen: { port: 8080 } })
    expect(problems).toEqual([expect.stringMatching(/^tenants: /)])
  })

  it('refuses an empty tenants map', async () => {
    const problems = await problemsOf({ tenants: {} })
    expect(problems).toEqual([expect.stringMatching(/^tenants: /)])
  })

  it('refuses a tenant without an upstream', async () => {
    const problems = await problemsOf({ tenants: { acme: {} } })
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream: /)])
  })
})

describe('internalAdmin.urls', () => {
  const blocked = { internalAdmin: { urls: ['http://admin.internal:8443/x'] } }

  it('refuses a staging upstream on the origin of an internalAdmin.urls entry', async () => {
    const problems = await problemsOf({ ...blocked, ...acme({ staging: 'http://admin.internal:8443' }) })
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: .*internalAdmin/)])
  })

  it('refuses a production upstream on the origin of an internalAdmin.urls entry', async () => {
    const problems = await problemsOf({ ...blocked, ...acme({ staging: 'http://127.0.0.1:4010', production: 'http://admin.internal:8443' }) })
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.production: .*internalAdmin/)])
  })

  it('refuses a blocked origin however the upstream path differs', async () => {
    // The path is a problem of its own now (an upstream is an origin); the origin is still refused.
    const problems = await problemsOf({ ...blocked, ...acme({ staging: 'http://admin.internal:8443/v4/other' }) })
    expect(problems).toContainEqual(expect.stringMatching(/^tenants\.acme\.upstream\.staging: .*internalAdmin/))
  })

  it('refuses a blocked origin spelled in another letter case', async () => {
    const problems = await problemsOf({ ...blocked, ...acme({ staging: 'HTTP://Admin.Internal:8443' }) })
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: /)])
  })

  it('refuses a blocked origin whose host is written with a trailing dot, on either side', async () => {
    expect(await problemsOf({ ...blocked, ...acme({ staging: 'http://admin.internal.:8443' }) })).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: .*internalAdmin/)])
    expect(await problemsOf({ internalAdmin: { urls: ['http://admin.internal.:8443/x'] }, ...acme({ staging: 'http://admin.internal:8443' }) })).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: .*internalAdmin/)])
  })

  it('refuses a blocked origin whose default port is written out', async () => {
    const problems = await problemsOf({ internalAdmin: { urls: ['http://admin.internal/'] }, ...acme({ staging: 'http://admin.internal:80' }) })
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.staging: /)])
  })

  it('accepts the same host on another port', async () => {
    const config = await load({ ...blocked, ...acme({ staging: 'http://admin.internal:9443' }) })
    expect(config.tenants.acme?.upstream.staging).toBe('http://admin.internal:9443')
  })

  it('accepts the same host and port under another scheme', async () => {
    const config = await load({ ...blocked, ...acme({ staging: 'https://admin.internal:8443' }) })
    expect(config.tenants.acme?.upstream.staging).toBe('https://admin.internal:8443')
  })

  it('refuses an internalAdmin.urls entry that is not http(s), which no upstream origin could ever match', async () => {
    const problems = await problemsOf({ internalAdmin: { urls: ['admin.internal:9000', 'mailto:ops@example.com'] }, ...acme({ staging: 'http://admin.internal:9000' }) })
    expect(problems).toEqual([expect.stringMatching(/^internalAdmin\.urls\.0: .*http\(s\)/), expect.stringMatching(/^internalAdmin\.urls\.1: .*http\(s\)/)])
  })

  it('reports an internalAdmin.urls entry that is not a URL as a CONFIG_INVALID problem', async () => {
    const problems = await problemsOf({ internalAdmin: { urls: ['not a url'] }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([expect.stringMatching(/^internalAdmin\.urls\.0: /)])
  })
})

describe('tenancy references', () => {
  it('refuses a tenancy.default that names an unconfigured tenant', async () => {
    const problems = await problemsOf({ tenancy: { default: 'ghost' }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([expect.stringMatching(/^tenancy\.default: .*ghost/)])
  })

  it('refuses a tenancy.hosts entry that names an unconfigured tenant', async () => {
    const problems = await problemsOf({ tenancy: { hosts: { 'api.example.com': 'ghost' } }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([expect.stringMatching(/^tenancy\.hosts\.api\.example\.com: .*ghost/)])
  })

  it('accepts tenancy.default and tenancy.hosts that name configured tenants', async () => {
    const config = await load({ tenancy: { default: 'acme', hosts: { 'api.example.com': 'acme' } }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(config.tenancy.default).toBe('acme')
    expect(config.tenancy.hosts).toEqual({ 'api.example.com': 'acme' })
  })

  it('refuses a tenancy.hosts key with a trailing dot, which no request could match', async () => {
    const problems = await problemsOf({ tenancy: { hosts: { 'api.example.com.': 'acme' } }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([expect.stringMatching(/^tenancy\.hosts\.api\.example\.com\.: .*write "api\.example\.com"/)])
  })

  it('refuses a tenancy.hosts key with a port, which no request could match', async () => {
    const problems = await problemsOf({ tenancy: { hosts: { 'api.example.com:8443': 'acme', '[::1]:8080': 'acme' } }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([
      expect.stringMatching(/^tenancy\.hosts\.api\.example\.com:8443: .*without its port or a trailing dot: write "api\.example\.com"/),
      expect.stringMatching(/^tenancy\.hosts\.\[::1\]:8080: .*write "\[::1\]"/)
    ])
  })

  it('refuses a tenancy.hosts key no Host can be: a placeholder (keys are not substituted), a space', async () => {
    const problems = await problemsOf({ tenancy: { hosts: { '${PUBLIC_HOST}': 'acme', 'api example.com': 'acme' } }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([
      'tenancy.hosts.…: expected a host as a Host header names it (RFC 3986: a name, an IPv4 address or a bracketed IPv6 one); keys are not substituted',
      'tenancy.hosts.api…: expected a host as a Host header names it (RFC 3986: a name, an IPv4 address or a bracketed IPv6 one); keys are not substituted'
    ])
  })

  it('refuses a bracketed tenancy.hosts key no Host can be, and an IPv6 address in another spelling than its one', async () => {
    const problems = await problemsOf({ tenancy: { hosts: { '[fe80::7%eth0]': 'acme', '[abc': 'acme', '[0:0::1]': 'acme', '[fe80::7%25eth0]': 'acme' } }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([
      'tenancy.hosts.…: expected a host as a Host header names it (RFC 3986: a name, an IPv4 address or a bracketed IPv6 one); keys are not substituted',
      'tenancy.hosts.…: expected a host as a Host header names it (RFC 3986: a name, an IPv4 address or a bracketed IPv6 one); keys are not substituted',
      'tenancy.hosts.[0:0::1]: an IPv6 address is matched in one spelling, without a zone: write "[::1]"',
      'tenancy.hosts.…: an IPv6 address is matched in one spelling, without a zone: write "[fe80::7]"'
    ])
  })

  it('refuses an allowed admin host no Host can be', async () => {
    const problems = await problemsOf({ admin: { allowedHosts: ['gw example.com'] }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([expect.stringMatching(/^admin\.allowedHosts\.0: a host as a Host header names it/)])
  })

  it('refuses a bare IPv6 tenancy.hosts key with the bracketed form to write instead', async () => {
    const problems = await problemsOf({ tenancy: { hosts: { '::1': 'acme', 'fe80::1': 'acme' } }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([
      expect.stringMatching(/^tenancy\.hosts\.::1: .*brackets.*write "\[::1\]"$/),
      expect.stringMatching(/^tenancy\.hosts\.fe80::1: .*write "\[fe80::1\]"$/)
    ])
    // The bracketed key is accepted.
    expect((await load({ tenancy: { hosts: { '[::1]': 'acme' } }, ...acme({ staging: 'http://127.0.0.1:4010' }) })).tenancy.hosts).toEqual({ '[::1]': 'acme' })
  })

  it('refuses two tenancy.hosts keys that differ only in case', async () => {
    const problems = await problemsOf({ tenancy: { hosts: { 'API.example.com': 'acme', 'api.example.com': 'acme' } }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([expect.stringMatching(/^tenancy\.hosts\.api\.example\.com: listed twice/)])
  })

  it('lower-cases tenancy.header', async () => {
    const config = await load({ tenancy: { header: 'X-Org-Id' }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(config.tenancy.header).toBe('x-org-id')
  })
})

describe('admin.token', () => {
  // Presented as `Authorization: Bearer <token>`: a token with a space could never be sent, and /admin/* would be locked for good.
  it.each(['my token', 'tab\tinside', 'naïve'])('refuses a token that cannot be sent as a bearer token, without quoting it', async (token) => {
    const problems = await problemsOf({ admin: { token }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([expect.stringMatching(/^admin\.token: an admin token is visible ASCII without spaces/)])
    expect(problems.join('\n')).not.toContain(token)
  })

  it('takes "" as no token', async () => {
    expect((await load({ admin: { token: '' }, ...acme({ staging: 'http://127.0.0.1:4010' }) })).admin.token).toBeNull()
  })
})

describe('admin.allowedHosts', () => {
  it('takes host names and addresses as a Host header names them, and none by default', async () => {
    const config = await load({ admin: { allowedHosts: ['gw.internal', 'GW.Example.com', '10.0.0.5', '[fd00::1]'] }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(config.admin.allowedHosts).toEqual(['gw.internal', 'GW.Example.com', '10.0.0.5', '[fd00::1]'])
    expect((await load(acme({ staging: 'http://127.0.0.1:4010' }))).admin.allowedHosts).toEqual([])
  })

  // Host is compared without its port, so an entry with one, or a bare IPv6 address, could never match.
  it.each(['gw.internal:9901', 'fd00::1', 'gw.internal.', ''])('refuses %j, which no Host could match', async (entry) => {
    const problems = await problemsOf({ admin: { allowedHosts: [entry] }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual([expect.stringMatching(/^admin\.allowedHosts\.0: /)])
  })
})

describe('unknown keys', () => {
  it('refuses an unknown top-level key', async () => {
    const problems = await problemsOf({ ...acme({ staging: 'http://127.0.0.1:4010' }), listn: { port: 1 } })
    expect(problems).toEqual([expect.stringContaining('listn')])
  })

  it('refuses an unknown key inside upstream with the path of its object', async () => {
    const problems = await problemsOf(acme({ staging: 'http://127.0.0.1:4010', stagging: 'http://127.0.0.1:4011' }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream: .*stagging/)])
  })

  it('refuses an unknown key inside a route with the path of the route', async () => {
    const problems = await problemsOf(withRoutes([{ method: 'POST', path: '/v1/x', action: 'execute', verb: 'POST' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0: .*verb/)])
  })

  it.each([
    ['shutdown', 'graceMs'],
    ['shutdown', 'idleCloseMs'],
    ['limits', 'upstreamTimeoutMs'],
    ['limits', 'connectTimeoutMs']
  ])('refuses a %s.%s longer than a Node timer can wait, and accepts the longest one it can', async (section, key) => {
    const upstream = acme({ staging: 'http://127.0.0.1:4010' })
    const problems = await problemsOf({ ...upstream, [section]: { [key]: 2_147_483_648 } })
    expect(problems).toEqual([`${section}.${key}: at most 2147483647 ms (about 24.8 days), the longest timer Node keeps`])
    const config = await load({ ...upstream, [section]: { [key]: 2_147_483_647 } })
    expect((config as unknown as Record<string, Record<string, number>>)[section]![key]).toBe(2_147_483_647)
  })

  it.each([
    ['limits', 'maxEventLoopDelayMs'],
    ['sessions', 'ttlMs']
  ])('accepts a %s.%s longer than a Node timer can wait: it sets no timer', async (section, key) => {
    const config = await load({ ...acme({ staging: 'http://127.0.0.1:4010' }), [section]: { [key]: 2_592_000_000 } })
    expect((config as unknown as Record<string, Record<string, number>>)[section]![key]).toBe(2_592_000_000)
  })

  it('refuses an unknown key inside limits', async () => {
    const problems = await problemsOf({ ...acme({ staging: 'http://127.0.0.1:4010' }), limits: { bodyByte: 10 } })
    expect(problems).toEqual([expect.stringMatching(/^limits: .*bodyByte/)])
  })
})

describe('legacy.deprecation.link', () => {
  function withLink(link: string): Record<string, unknown> {
    return acme({ staging: 'http://127.0.0.1:4010' }, { legacy: { deprecation: { date: '2026-07-01T00:00:00Z', link } } })
  }

  it('accepts a page with a query and a fragment', async () => {
    const config = await load(withLink('https://docs.example.com/migrate?from=v1#sessions'))
    expect(config.tenants.acme?.legacy.deprecation?.link).toBe('https://docs.example.com/migrate?from=v1#sessions')
  })

  it.each([
    ['not http(s)', 'ftp://docs.example.com/migrate', /^tenants\.acme\.legacy\.deprecation\.link: Invalid URL/],
    ['with credentials', 'https://user:key_secret@docs.example.com/', /^tenants\.acme\.legacy\.deprecation\.link: a link sent to clients carries no credentials$/]
  ])('refuses a link %s', async (_case, link, problem) => {
    const problems = await problemsOf(withLink(link))
    expect(problems).toEqual([expect.stringMatching(problem)])
    expect(problems.join('\n')).not.toContain('key_secret')
  })
})

describe('routes', () => {
  it('refuses a route that a route listed before it shadows: the same method and path shape, the first always wins', async () => {
    const problems = await problemsOf(
      withRoutes([
        { method: 'POST', path: '/v1/x', action: 'execute' },
        { method: 'post', path: '/v1/x', action: 'proxy', rewrite: '/v4/x' },
        { method: 'POST', path: '/v1/runs/:runId/invoke', action: 'execute' },
        { method: 'POST', path: '/v1/runs/latest/invoke', action: 'execute' },
        { method: 'GET', path: '/v1/runs/latest/invoke', action: 'proxy', rewrite: '/v4/latest' }
      ])
    )
    expect(problems).toEqual([
      expect.stringMatching(/^tenants\.acme\.legacy\.routes\.1: never matched: routes\.0 \(POST \/v1\/x\) comes first/),
      expect.stringMatching(/^tenants\.acme\.legacy\.routes\.3: never matched: routes\.2 \(POST \/v1\/runs\/:runId\/invoke\)/)
    ])
    // A literal route listed before the parameter one that would cover it is matched first: fine.
    await expect(load(withRoutes([{ method: 'POST', path: '/v1/runs/latest/invoke', action: 'execute' }, { method: 'POST', path: '/v1/runs/:runId/invoke', action: 'execute' }]))).resolves.toBeDefined()
  })

  it.each(['/v4/execute', '/:version/execute'])('refuses a legacy route %s, which would take native /v4/ traffic', async (path) => {
    const problems = await problemsOf(withRoutes([{ method: 'POST', path, action: 'execute' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.path: .*native \/v4\//)])
  })

  it('refuses a proxy route without rewrite', async () => {
    const problems = await problemsOf(withRoutes([{ method: 'GET', path: '/v1/policies', action: 'proxy' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.rewrite: /)])
  })

  it('refuses a rewrite that uses a parameter the path does not have', async () => {
    const problems = await problemsOf(withRoutes([{ method: 'GET', path: '/v1/policies/:id', action: 'proxy', rewrite: '/v4/policies/:policyId' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.rewrite: .*:policyId/)])
  })

  it('refuses a param: stateKey that the path does not have', async () => {
    const problems = await problemsOf(withRoutes([{ method: 'POST', path: '/v1/runs/:runId/invoke', action: 'session-execute', stateKey: 'param:id' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.stateKey: .*:id/)])
  })

  it.each(['header:authorization', 'header:X-Api-Key', 'header:x-session-token', 'header:x-service-api-key', 'header:cookie'])('refuses the stateKey %s: the raw credential would be a session-map key (SPEC 4)', async (stateKey) => {
    const problems = await problemsOf(withRoutes([{ method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.stateKey: .*carries a credential/)])
  })

  it.each(['cookie:run', 'param:', 'body:stateId', 'header:', 'runId'])('refuses the stateKey %s as a malformed stateKey', async (stateKey) => {
    const problems = await problemsOf(withRoutes([{ method: 'POST', path: '/v1/runs/:runId/invoke', action: 'session-execute', stateKey }]))
    expect(problems).toContainEqual(expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.stateKey: expected param:NAME, header:NAME or body:/))
    for (const problem of problems) expect(problem).toMatch(/^tenants\.acme\.legacy\.routes\.0\.stateKey: /)
  })

  it('refuses a stateKey on a route that is not session-execute', async () => {
    const problems = await problemsOf(withRoutes([{ method: 'POST', path: '/v1/headless/runs', action: 'execute', stateKey: 'body:/stateId' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.stateKey: /)])
  })

  it('refuses a rewrite on a route that is not proxy', async () => {
    const problems = await problemsOf(withRoutes([{ method: 'POST', path: '/v1/headless/runs', action: 'execute', rewrite: '/v4/execute' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.rewrite: /)])
  })

  it('refuses an unknown action', async () => {
    const problems = await problemsOf(withRoutes([{ method: 'POST', path: '/v1/x', action: 'forward' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.action: /)])
  })

  it('refuses an unknown method', async () => {
    const problems = await problemsOf(withRoutes([{ method: 'FETCH', path: '/v1/x', action: 'execute' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.method: /)])
  })

  it('refuses a path that does not start with /', async () => {
    const problems = await problemsOf(withRoutes([{ method: 'POST', path: 'v1/x', action: 'execute' }]))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.path: /)])
  })

  it('accepts valid routes of every kind and upper-cases their methods', async () => {
    const config = await load(
      withRoutes([
        { method: 'post', path: '/v1/headless/runs', action: 'execute' },
        { method: 'POST', path: '/v1/runs/:runId/invoke', action: 'session-execute', stateKey: 'param:runId' },
        { method: 'POST', path: '/v1/sessions/invoke', action: 'session-execute', stateKey: 'header:x-state-id' },
        { method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/state/id' },
        { method: 'get', path: '/v1/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id' }
      ])
    )
    const routes = config.tenants.acme?.legacy.routes ?? []
    expect(routes.map((route) => route.method)).toEqual(['POST', 'POST', 'POST', 'POST', 'GET'])
    expect(routes[4]).toEqual({ method: 'GET', path: '/v1/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id' })
  })
})

describe('every problem is reported together', () => {
  it('reports every problem of a file at once, each with its path', async () => {
    const problems = await problemsOf({
      bogus: true,
      limits: { bodyBytes: 0 },
      tenancy: { default: 'ghost' },
      tenants: {
        acme: {
          upstream: { staging: 'http://127.0.0.1:4010', extra: 1 },
          legacy: { routes: [{ method: 'GET', path: '/v1/policies', action: 'proxy' }] }
        },
        beta: { upstream: { staging: 'http://127.0.0.1:4011', target: 'production' } }
      }
    })
    expect(problems).toHaveLength(6)
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringContaining('bogus'),
        expect.stringMatching(/^limits\.bodyBytes: /),
        expect.stringMatching(/^tenancy\.default: /),
        expect.stringMatching(/^tenants\.acme\.upstream: .*extra/),
        expect.stringMatching(/^tenants\.acme\.legacy\.routes\.0\.rewrite: /),
        expect.stringMatching(/^tenants\.beta\.upstream(\.production|\.target)?: /)
      ])
    )
  })

  it('reports a tenant reference together with a wrongly typed key elsewhere', async () => {
    const problems = await problemsOf({ listen: { port: 'eighty' }, log: 7, tenancy: { default: 'ghost' }, ...acme({ staging: 'http://127.0.0.1:4010' }) })
    expect(problems).toEqual(
      expect.arrayContaining([expect.stringMatching(/^listen\.port: /), expect.stringMatching(/^log: /), expect.stringMatching(/^tenancy\.default: .*ghost/)])
    )
    expect(problems).toHaveLength(3)
  })

  it('leaves the tenant references unchecked while the tenants themselves are the wrong shape', async () => {
    const problems = await problemsOf({ tenancy: { default: 'ghost' }, internalAdmin: { urls: ['http://admin.internal'] }, tenants: { acme: { upstream: 5 } } })
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream: /)])
  })

  it('reports an invalid upstream URL together with the other problems of the file', async () => {
    const problems = await problemsOf({
      internalAdmin: { urls: ['http://admin.internal:8443'] },
      tenancy: { default: 'ghost' },
      tenants: {
        acme: { upstream: { staging: 'not a url' } },
        beta: { upstream: { staging: 'http://admin.internal:8443' } }
      }
    })
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^tenants\.acme\.upstream\.staging: Invalid URL/),
        expect.stringMatching(/^tenants\.beta\.upstream\.staging: .*internalAdmin/),
        expect.stringMatching(/^tenancy\.default: /)
      ])
    )
    expect(problems).toHaveLength(3)
  })
})

describe('the shared store and its older spelling (SPEC 12)', () => {
  const upstream = { staging: 'http://127.0.0.1:4010' }

  it('resolves store from sessions.store / sessions.redis, the older spelling, and fills both', async () => {
    const config = await load({ ...acme(upstream), sessions: { store: 'redis', redis: { url: 'redis://127.0.0.1:6379' } } })
    expect(config.store).toEqual({ kind: 'redis', redis: { url: 'redis://127.0.0.1:6379', keyPrefix: 'v4gw:' }, flushMs: 2000 })
    expect(config.sessions.store).toBe('redis')
    expect(config.sessions.redis).toEqual(config.store.redis)
  })

  it('gives the session map the top-level store', async () => {
    const config = await load({ ...acme(upstream), store: { kind: 'redis', redis: { url: 'redis://127.0.0.1:6379', keyPrefix: 'gw1:' }, flushMs: 500 } })
    expect(config.sessions.store).toBe('redis')
    expect(config.sessions.redis).toEqual({ url: 'redis://127.0.0.1:6379', keyPrefix: 'gw1:' })
    expect(config.store.flushMs).toBe(500)
  })

  it('refuses store.flushMs above 8 s: a fleet answer may be at most 10 s old (SPEC 12), two writes taking up to 1 s each', async () => {
    expect(await problemsOf({ ...acme(upstream), store: { flushMs: 9_000 } })).toEqual([expect.stringMatching(/^store\.flushMs: at most 8000 ms/)])
    expect((await load({ ...acme(upstream), store: { flushMs: 8_000 } })).store.flushMs).toBe(8_000)
  })

  it('reports store.kind when the two spellings say different things', async () => {
    const problems = await problemsOf({ ...acme(upstream), store: { kind: 'memory' }, sessions: { store: 'redis', redis: { url: 'redis://127.0.0.1:6379' } } })
    expect(problems).toEqual([expect.stringMatching(/^store\.kind: differs from sessions\.store, the older spelling/)])
  })

  it('reports store.redis.url when the two spellings name different servers, without either URL', async () => {
    const problems = await problemsOf({ ...acme(upstream), store: { redis: { url: 'redis://gw:s3cret@a.internal:6379' } }, sessions: { redis: { url: 'redis://b.internal:6379' } } })
    expect(problems).toEqual([expect.stringMatching(/^store\.redis\.url: differs from sessions\.redis\.url/)])
    expect(problems.join('\n')).not.toContain('s3cret')
  })
})

describe('client ids (SPEC 12)', () => {
  const upstream = { staging: 'http://127.0.0.1:4010' }

  it('defaults clients.key to [credential] and lower-cases a header source', async () => {
    expect((await load(acme(upstream))).tenants.acme?.clients).toEqual({ key: ['credential'], labels: {}, maxPerRoute: 10_000, retentionDays: 90 })
    const config = await load(acme(upstream, { clients: { key: ['header:X-Client-Id', 'credential'], labels: { 'hdr:batch': { name: 'Batch' } } } }))
    expect(config.tenants.acme?.clients).toEqual({ key: ['header:x-client-id', 'credential'], labels: { 'hdr:batch': { name: 'Batch', owner: null } }, maxPerRoute: 10_000, retentionDays: 90 })
  })

  it.each(['authorization', 'X-Session-Token', 'x-api-key', 'x-service-api-key', 'cookie', 'Proxy-Authorization'])('refuses header:%s as a client-id source: it carries a credential', async (name) => {
    const problems = await problemsOf(acme(upstream, { clients: { key: [`header:${name}`] } }))
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.clients\.key\.0: expected credential or header:NAME, where NAME is not a header that carries a credential/)])
  })

  it.each(['Authorization', 'x-api-key', 'cookie'])('refuses tenancy.header %s: a header that carries a credential, whose value would be logged as requestedTenant', async (name) => {
    const problems = await problemsOf({ tenancy: { header: name }, ...acme(upstream) })
    expect(problems).toEqual([expect.stringMatching(/^tenancy\.header: expected an HTTP header name that does not carry a credential/)])
  })

  it('refuses a header source named as the query credential', async () => {
    const problems = await problemsOf({ credentials: { queryParam: 'Token' }, ...acme(upstream, { clients: { key: ['credential', 'header:token'] } }) })
    expect(problems).toEqual([expect.stringMatching(/^tenants\.acme\.clients\.key\.1: header:token has the name of the query credential/)])
  })

  it('refuses an exemption and a label of a kind no source of clients.key produces', async () => {
    const deprecation = { date: '2030-01-01T00:00:00Z', exempt: [{ client: 'fp:0123456789abcdef', until: '2030-06-01T00:00:00Z' }] }
    const problems = await problemsOf(acme(upstream, { legacy: { deprecation }, clients: { key: ['header:x-client-id'], labels: { 'fp:0123456789abcdef': 'batch', anonymous: 'nobody', 'hdr#0123456789abcdef': 'hashed' } } }))
    expect(problems.sort()).toEqual([
      expect.stringMatching(/^tenants\.acme\.clients\.labels\.fp:….*fp:0123456789abcdef: an fp: id comes only from the credential source/),
      expect.stringMatching(/^tenants\.acme\.legacy\.deprecation\.exempt\.0\.client: an fp: id comes only from the credential source/)
    ])
  })
})

describe('percentages written as placeholders (SPEC 8: a number may be the text a placeholder leaves)', () => {
  it('reads canary.percent, brownouts.clients and shadow.percent from the environment, and refuses text that is no percentage', async () => {
    const { parseConfigText, ConfigError } = await import('../../../src/config/load-config.js')
    const yaml = [
      'tenants:',
      '  acme:',
      '    upstream: { staging: "http://127.0.0.1:4010", legacy: "http://127.0.0.1:4011" }',
      '    legacy:',
      '      deprecation: { date: "2030-01-01T00:00:00Z", brownouts: { clients: "${BROWNOUT_PCT:-25}" } }',
      '    migration:',
      '      canary: { percent: "${CANARY_PCT:-10}" }',
      '      shadow: { percent: "${SHADOW_PCT:-100}" }',
      ''
    ].join('\n')
    const config = parseConfigText(yaml, 'percent.yaml', { CANARY_PCT: '12.5', SHADOW_PCT: '0.25' })
    expect(config.tenants.acme?.migration.canary?.percent).toBe(12.5)
    expect(config.tenants.acme?.migration.shadow?.percent).toBe(0.25)
    expect(config.tenants.acme?.legacy.deprecation?.brownouts?.clients).toBe(25)
    for (const bad of ['101', '12.345', 'ten', '-1']) {
      expect(() => parseConfigText(yaml, 'percent.yaml', { CANARY_PCT: bad }), bad).toThrow(ConfigError)
    }
  })
})
