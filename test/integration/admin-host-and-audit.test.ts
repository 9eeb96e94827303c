import { describe, expect, it } from 'vitest'
import { configSchema } from '../../src/config/schema.js'
import { deepFreeze } from '../../src/util/deep-freeze.js'
import { send } from '../helpers/http.js'
import { rawExchange } from '../helpers/raw-http.js'
import { spawnGateway } from '../helpers/spawn-gateway.js'
import { startGateway, testConfig, useGateway } from '../helpers/start-gateway.js'
import { useTempDir } from '../helpers/temp-dir.js'

const ADMIN_TOKEN = 'admin-token-of-the-host-suite-0123'
const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }

/** SPEC 18: an `/admin/*` request whose Host does not name the listener is refused, against DNS rebinding. */
describe('the admin API and the Host it is called by', () => {
  const gw = useGateway(() => testConfig('http://127.0.0.1:9', { admin: { token: ADMIN_TOKEN, allowedHosts: ['gw.internal', '[fd00::5]', '[fe80::7%eth0]'] } }))

  // A zone id in a Host (`[::1%1]`) was a 500: the URL parser refuses what isIPv6 accepts.
  it.each(['rebound.attacker.example', 'rebound.attacker.example:9901', '127.0.0.2', '0.0.0.0', '[::2]', 'gw.internal.attacker.example', 'localhost.attacker.example', '[::1%1]', '[fd00::5%eth0]:9901'])(
    'refuses /admin/* with Host %s with 403 FORBIDDEN, the right token notwithstanding',
    async (host) => {
      for (const [method, path] of [['GET', '/admin/sessions'], ['POST', '/admin/reload'], ['DELETE', '/admin/sessions'], ['GET', '/admin/no-such-endpoint']] as const) {
        const answer = await send(gw.adminUrl, path, { method, headers: { ...admin, host } })
        expect(answer.status, `${method} ${path}`).toBe(403)
        expect(answer.json.error.code).toBe('FORBIDDEN')
      }
    }
  )

  it.each(['localhost', 'LOCALHOST:9901', 'localhost.', '127.0.0.1', '127.0.0.1:1', '[::1]', '[0:0::1]:9901', 'gw.internal', 'GW.Internal:9901', '[fd00::5]:80', '[FD00:0::5]', '[fe80::7]'])(
    'answers /admin/* with Host %s: loopback, or in admin.allowedHosts',
    async (host) => {
      expect((await send(gw.adminUrl, '/admin/sessions', { headers: { ...admin, host } })).status).toBe(200)
    }
  )

  it('answers /healthz, /readyz and /metrics whatever the Host', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      expect((await send(gw.adminUrl, path, { headers: { host: 'rebound.attacker.example' } })).status, path).toBe(200)
    }
  })

  it('answers the probes to a request with no Host at all, and refuses /admin/* without one with the 403 envelope', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const { response } = await rawExchange(gw.adminUrl, `GET ${path} HTTP/1.1\r\nConnection: close\r\n\r\n`)
      expect(response?.status, path).toBe(200)
    }
    const { response } = await rawExchange(gw.adminUrl, `GET /admin/sessions HTTP/1.1\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nConnection: close\r\n\r\n`)
    expect(response?.status).toBe(403)
    expect(response?.json).toMatchObject({ error: { code: 'FORBIDDEN' } })
    expect(response?.headers['x-request-id']).toBeDefined()
  })

  it('answers a probe that sends an Expect it does not know, ignoring it (RFC 9110 10.1.1), not a bare 417', async () => {
    const { response } = await rawExchange(gw.adminUrl, 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nExpect: something-else\r\nConnection: close\r\n\r\n')
    expect(response?.status).toBe(200)
  })

  it('checks the Host first, then the token, then the body type (SPEC 18)', async () => {
    const textBody = { 'content-type': 'text/plain' }
    const badHost = { host: 'rebound.attacker.example' }
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { ...badHost, ...textBody }, body: 'x' })).json.error.code).toBe('FORBIDDEN')
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: textBody, body: 'x' })).json.error.code).toBe('AUTH_INVALID')
    expect((await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { ...admin, ...textBody }, body: 'x' })).json.error.code).toBe('UNSUPPORTED_MEDIA_TYPE')
  })

  it('takes a reloaded admin.allowedHosts for the next request', async () => {
    const host = { host: 'added-by-reload.internal' }
    expect((await send(gw.adminUrl, '/admin/sessions', { headers: { ...admin, ...host } })).status).toBe(403)
    const reloaded = deepFreeze(configSchema.parse(testConfig('http://127.0.0.1:9', { admin: { token: ADMIN_TOKEN, allowedHosts: ['added-by-reload.internal'] } })))
    await gw.gateway.applyConfig(reloaded)
    expect((await send(gw.adminUrl, '/admin/sessions', { headers: { ...admin, ...host } })).status).toBe(200)
    expect((await send(gw.adminUrl, '/admin/sessions', { headers: { ...admin, host: 'gw.internal' } })).status).toBe(403)
  })
})

describe('the admin API on an address of its own', () => {
  const dir = useTempDir('v4gw-admin-host-')

  // 127.0.0.2 is on loopback on Linux, but as a Host it is not one of SPEC 18's loopback names:
  // it is let in here only as the address the listener is bound to.
  it("answers /admin/* with the listener's own address as Host, and refuses another", async () => {
    const path = await dir.write('own-host.yaml', ['listen: { host: 127.0.0.1, port: 0 }', 'admin: { host: 127.0.0.2, port: 0 }', 'log: { level: warn }', 'tenants: { acme: { upstream: { staging: "http://127.0.0.1:9" } } }'].join('\n'))
    const gateway = await spawnGateway(path)
    const port = new URL(gateway.adminUrl).port
    expect(gateway.adminUrl).toBe(`http://127.0.0.2:${port}`)
    expect((await send(gateway.adminUrl, '/admin/sessions', { headers: { host: `127.0.0.2:${port}` } })).status).toBe(200)
    expect((await send(gateway.adminUrl, '/admin/sessions', { headers: { host: `127.0.0.3:${port}` } })).status).toBe(403)
  })
})

/** SPEC 14: each admin call that changes state writes one `warn` line `admin change`, with no credential in it. */
describe('the admin change line', () => {
  const gw = useGateway(() => testConfig('http://127.0.0.1:9', { admin: { token: ADMIN_TOKEN } }))

  function changeLines(requestId: string): Record<string, unknown>[] {
    return gw.logs.lines().filter((line) => line.msg === 'admin change' && line.requestId === requestId)
  }

  it('logs a reload with its endpoint, body and reason, client address and request id, never a credential', async () => {
    const body = {
      reason: 'rotate upstream after incident 7',
      token: 'leaked-token-in-a-body',
      headers: { authorization: 'Bearer pasted-bearer-token', 'x-api-key': 'key_pasted_in_body' },
      note: 'Bearer pasted-in-a-note',
      password: 'hunter2-in-a-body'
    }
    await send(gw.adminUrl, '/admin/reload', { headers: { ...admin, 'x-request-id': 'audit-reload-1' }, json: body })
    const lines = changeLines('audit-reload-1')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({
      level: 40,
      endpoint: 'POST /admin/reload',
      clientAddress: '127.0.0.1',
      requestId: 'audit-reload-1',
      body: { reason: 'rotate upstream after incident 7', token: '[redacted]', headers: '[redacted]', note: '[redacted]', password: '[redacted]' }
    })
    const log = gw.logs.text()
    for (const secret of [ADMIN_TOKEN, 'leaked-token-in-a-body', 'pasted-bearer-token', 'key_pasted_in_body', 'pasted-in-a-note', 'hunter2-in-a-body']) expect(log).not.toContain(secret)
  })

  it('logs only the members a call takes, and no value holding a credential: SPEC 5\'s Token scheme, a service key in a reason, members it refuses', async () => {
    // Refused with 400 (unknown members), and logged before that: the line must hold none of it.
    const body = { tenant: 'acme', stage: 'legacy', reason: 'INC-9: the caller used key_live_pasted1 by mistake', until: 'Token tok-pasted-as-until', auth: 'tok-in-an-unknown-member', key: 'key_live_unknown2', extra: { nested: 'tok-nested-3' } }
    const answer = await send(gw.adminUrl, '/admin/migration/stage', { method: 'PUT', headers: { ...admin, 'x-request-id': 'audit-token-1' }, json: body })
    expect(answer.status).toBe(400)
    await send(gw.adminUrl, '/admin/sessions?tenant=acme&auth=Token%20tok-in-a-query', { method: 'DELETE', headers: { ...admin, 'x-request-id': 'audit-token-2' } })
    expect(changeLines('audit-token-1')).toEqual([
      expect.objectContaining({ body: { tenant: 'acme', stage: 'legacy', reason: 'INC-9: the caller used [redacted] by mistake', until: 'Token [redacted]', auth: '[redacted]', key: '[redacted]', extra: '[redacted]' } })
    ])
    expect(changeLines('audit-token-2')).toEqual([expect.objectContaining({ query: { tenant: 'acme', auth: '[redacted]' } })])
    const log = gw.logs.text()
    for (const secret of ['key_live_pasted1', 'tok-pasted-as-until', 'tok-in-an-unknown-member', 'key_live_unknown2', 'tok-nested-3', 'tok-in-a-query']) expect(log).not.toContain(secret)
  })

  it('keeps a reason that only mentions tokens or keys as written, masks a credential inside one, and logs no bare JSON string body', async () => {
    const reason = 'V4 rejects token refresh for mobile during key_rotation; the caller sent token=tok-in-a-reason-9 and Bearer tok-after-bearer-8'
    await send(gw.adminUrl, '/admin/migration/stage', { method: 'PUT', headers: { ...admin, 'x-request-id': 'audit-reason-1' }, json: { tenant: 'acme', stage: 'legacy', reason } })
    expect(changeLines('audit-reason-1')).toEqual([
      expect.objectContaining({ body: expect.objectContaining({ reason: 'V4 rejects token refresh for mobile during key_rotation; the caller sent token=[redacted] and Bearer [redacted]' }) })
    ])
    await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { ...admin, 'content-type': 'application/json', 'x-request-id': 'audit-bare-1' }, body: '"eyJhbGciOi.opaque-session-token-7"' })
    expect(changeLines('audit-bare-1')).toEqual([expect.objectContaining({ body: '[redacted]' })])
    await send(gw.adminUrl, '/admin/sessions?key_live_in_a_name_42=1', { method: 'DELETE', headers: { ...admin, 'x-request-id': 'audit-name-1' } })
    expect(changeLines('audit-name-1')).toEqual([expect.objectContaining({ query: { '[redacted]': '[redacted]' } })])
    // The session map's own line masks its tenant as the change line does.
    await send(gw.adminUrl, '/admin/sessions?tenant=Bearer%20tok-as-a-tenant-5', { method: 'DELETE', headers: { ...admin, 'x-request-id': 'audit-tenant-1' } })
    expect(gw.logs.lines().filter((line) => line.msg === 'session map cleared' && line.reqId === 'audit-tenant-1')).toEqual([expect.objectContaining({ tenant: 'Bearer [redacted]', deleted: 0 })])
    // The override is kept, answered and shown with its reason as the line has it (SPEC 12: the report runs in CI).
    const pause = await send(gw.adminUrl, '/admin/brownouts/pause', { method: 'POST', headers: admin, json: { tenant: 'acme', until: new Date(Date.now() + 3_600_000).toISOString(), reason: 'paused: the caller sent Token tok-in-a-pause-4' } })
    expect(pause.status).toBe(200)
    const override = await send(gw.adminUrl, '/admin/migration/stage', { method: 'PUT', headers: admin, json: { tenant: 'acme', stage: 'translate', reason: 'held: token=tok-in-an-override-3' } })
    expect(override.status).toBe(200)
    const migration = await send(gw.adminUrl, '/admin/migration', { headers: admin })
    expect(migration.text).toContain('held: token=[redacted]')
    expect(migration.text).toContain('paused: the caller sent Token [redacted]')
    const log = gw.logs.text()
    for (const secret of ['tok-in-a-reason-9', 'tok-after-bearer-8', 'opaque-session-token-7', 'key_live_in_a_name_42', 'tok-as-a-tenant-5', 'tok-in-a-pause-4', 'tok-in-an-override-3']) {
      expect(log).not.toContain(secret)
      expect(migration.text).not.toContain(secret)
    }
  })

  it('logs a session deletion with its query, and a call without a body', async () => {
    await send(gw.adminUrl, '/admin/sessions?tenant=acme', { method: 'DELETE', headers: { ...admin, 'x-request-id': 'audit-delete-1' } })
    expect(changeLines('audit-delete-1')).toEqual([expect.objectContaining({ level: 40, endpoint: 'DELETE /admin/sessions', query: { tenant: 'acme' }, body: null, clientAddress: '127.0.0.1' })])
    await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { ...admin, 'x-request-id': 'audit-reload-2' } })
    expect(changeLines('audit-reload-2')).toEqual([expect.objectContaining({ endpoint: 'POST /admin/reload', body: null })])
  })

  it('logs nothing for a call that changes nothing, or that is refused', async () => {
    await send(gw.adminUrl, '/admin/sessions', { headers: { ...admin, 'x-request-id': 'audit-read-1' } })
    await send(gw.adminUrl, '/admin/explain', { headers: { ...admin, 'x-request-id': 'audit-read-1' }, json: { method: 'GET', path: '/v4/x' } })
    await send(gw.adminUrl, '/admin/reload', { method: 'POST', headers: { 'x-request-id': 'audit-read-1' } })
    expect(changeLines('audit-read-1')).toEqual([])
  })
})

/** SPEC 17: the running config's hash, in `v4gw_config_info` and in `/readyz`. */
describe('the config hash', () => {
  async function hashesOf(adminUrl: string): Promise<{ readyz: string; metric: string | undefined }> {
    const readyz = (await send(adminUrl, '/readyz')).json.configHash as string
    const metric = /^v4gw_config_info\{hash="([^"]*)"\} 1$/m.exec((await send(adminUrl, '/metrics')).text)?.[1]
    return { readyz, metric }
  }

  it('is the same 12 hex digits in /readyz and v4gw_config_info, for the same config on two gateways', async () => {
    const first = await startGateway(testConfig('http://127.0.0.1:9'))
    const second = await startGateway(testConfig('http://127.0.0.1:9'))
    const hashes = await hashesOf(first.adminUrl)
    expect(hashes.readyz).toMatch(/^[0-9a-f]{12}$/)
    expect(hashes.metric).toBe(hashes.readyz)
    expect(await hashesOf(second.adminUrl)).toEqual(hashes)
  })

  it('changes with the config on a reload, and the metric keeps one series', async () => {
    const gateway = await startGateway(testConfig('http://127.0.0.1:9'))
    const before = await hashesOf(gateway.adminUrl)
    await gateway.gateway.applyConfig(deepFreeze(configSchema.parse(testConfig('http://127.0.0.1:9', { limits: { bodyBytes: 2048 } }))))
    const after = await hashesOf(gateway.adminUrl)
    expect(after.readyz).not.toBe(before.readyz)
    expect(after.metric).toBe(after.readyz)
    expect((await send(gateway.adminUrl, '/metrics')).text.match(/^v4gw_config_info\{/gm)).toHaveLength(1)
  })

  // Anyone who can scrape /metrics reads the hash: a hash over a secret's value would let them
  // confirm a guess of a weak token offline. Whether one is set counts, not what it is.
  it('does not depend on the value of a secret, only on whether one is set', async () => {
    const redis = (password: string): Record<string, unknown> => ({ sessions: { redis: { url: `redis://user:${password}@127.0.0.1:6379` } } })
    const one = await startGateway(testConfig('http://127.0.0.1:9', { admin: { token: 'first-secret-token' }, ...redis('first-password') }))
    const other = await startGateway(testConfig('http://127.0.0.1:9', { admin: { token: 'other-secret-token' }, ...redis('other-password') }))
    const none = await startGateway(testConfig('http://127.0.0.1:9', redis('first-password')))
    const hash = (await hashesOf(one.adminUrl)).readyz
    expect((await hashesOf(other.adminUrl)).readyz).toBe(hash)
    expect((await hashesOf(none.adminUrl)).readyz).not.toBe(hash)
  })
})
