import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { useNetworkNamespace, type NetworkNamespace } from '../helpers/network-namespace.js'
import { spawnGateway, type SpawnedGateway } from '../helpers/spawn-gateway.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

/** Requests made one after another with node:http from inside the namespace, which sends the Host it is given. */
const CLIENT = `
const http = require('node:http')
const calls = JSON.parse(process.argv[1])
function one({ url, method, headers }) {
  return new Promise((resolve) => {
    const call = http.request(url, { method, headers, agent: false }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk) => { body += chunk })
      response.on('end', () => resolve({ status: response.statusCode, body }))
    })
    call.on('error', (error) => resolve({ error: error.code || error.message }))
    call.end()
  })
}
;(async () => {
  const replies = []
  for (const call of calls) replies.push(await one(call))
  console.log(JSON.stringify(replies))
})()
`

interface Reply {
  status: number
  code: string | undefined
  message: string | undefined
}

type Call = [method: string, path: string, headers?: Record<string, string>]

/** Calls to the admin listener from the namespace's peer address, in one process (a node start is the slow part). */
async function callsFromPeer(namespace: NetworkNamespace, gateway: SpawnedGateway, calls: Call[]): Promise<Reply[]> {
  const port = new URL(gateway.adminUrl).port
  const requests = calls.map(([method, path, headers]) => ({ url: `http://${namespace.hostAddress}:${port}${path}`, method, headers: { host: `${namespace.hostAddress}:${port}`, ...headers } }))
  const out = await namespace.node(CLIENT, [JSON.stringify(requests)])
  return (JSON.parse(out) as { status?: number; body?: string; error?: string }[]).map((result) => {
    if (result.status === undefined) throw new Error(`a call from ${namespace.peerAddress} failed: ${result.error ?? out}`)
    let body: { error?: { code?: string; message?: string } } = {}
    try {
      body = JSON.parse(result.body ?? '') as typeof body
    } catch {
      // /metrics is text.
    }
    return { status: result.status, code: body.error?.code, message: body.error?.message }
  })
}

function configFile(namespace: NetworkNamespace, token: string | undefined): string {
  return [
    'listen: { host: 127.0.0.1, port: 0 }',
    // A wildcard, as the image binds it (V4GW_ADMIN_HOST); the namespace's side of the pair is a Host the API answers to.
    `admin: { host: 0.0.0.0, port: 0, allowedHosts: ["${namespace.hostAddress}"]${token === undefined ? '' : `, token: "${token}"`} }`,
    'log: { level: info }',
    'tenants: { acme: { upstream: { staging: "http://127.0.0.1:9" } } }'
  ].join('\n')
}

/**
 * SPEC 18: the admin API off loopback. The peer is a network namespace made for the test, so
 * the requests come from an address that is not the machine's own.
 */
describe('the admin API from a peer that is not loopback', () => {
  const namespace = useNetworkNamespace()
  const dir = useTempDir('v4gw-off-loopback-')

  it('without admin.token: /admin/* answers 401 AUTH_INVALID to the peer, the probes and /metrics answer it, loopback keeps the API', async () => {
    const gateway = await spawnGateway(await dir.write('no-token.yaml', configFile(namespace, undefined)))
    const open: Call[] = [['GET', '/healthz'], ['GET', '/readyz'], ['GET', '/metrics']]
    // The migration page too: it needs no token, but without one the admin API stays loopback's (docs/decisions.md).
    const guarded: Call[] = [['GET', '/admin/sessions'], ['GET', '/admin/migration'], ['GET', '/admin/ui'], ['POST', '/admin/reload'], ['DELETE', '/admin/sessions'], ['GET', '/admin/no-such-endpoint']]
    // The Host is checked first: a peer calling by a name the listener does not answer to gets 403.
    const rebound: Call = ['GET', '/admin/sessions', { host: 'rebound.attacker.example' }]
    const replies = await callsFromPeer(namespace, gateway, [...open, ...guarded, rebound])
    expect(replies.slice(0, open.length).map((reply) => reply.status)).toEqual([200, 200, 200])
    for (const reply of replies.slice(open.length, open.length + guarded.length)) {
      expect(reply).toEqual({ status: 401, code: 'AUTH_INVALID', message: 'set admin.token to use the admin API from another host' })
    }
    expect(replies.at(-1)).toMatchObject({ status: 403, code: 'FORBIDDEN' })
    // The same listener from loopback: the API answers without a token.
    const local = `http://127.0.0.1:${new URL(gateway.adminUrl).port}`
    expect((await send(local, '/admin/sessions')).status).toBe(200)
    // Nothing was reloaded or deleted on the peer's behalf (lines reach stdout within a quarter of a second).
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(gateway.output()).not.toContain('"msg":"admin change"')
  })

  it('with admin.token: the peer with the token is served, and its change is logged with its address', async () => {
    const token = 'off-loopback-admin-token-0123456789'
    const gateway = await spawnGateway(await dir.write('token.yaml', configFile(namespace, token)))
    const withToken = { authorization: `Bearer ${token}` }
    const [withoutToken, page, read, cleared] = await callsFromPeer(namespace, gateway, [
      ['GET', '/admin/sessions'],
      // SPEC 12: the migration page is served without the token; its data calls need it.
      ['GET', '/admin/ui'],
      ['GET', '/admin/sessions', withToken],
      ['DELETE', '/admin/sessions', { ...withToken, 'x-request-id': 'peer-change-1' }]
    ])
    expect(withoutToken?.code).toBe('AUTH_INVALID')
    expect(page?.status).toBe(200)
    expect(read?.status).toBe(200)
    expect(cleared?.status).toBe(200)
    // Log lines reach stdout in batches (a quarter of a second at most).
    const changeLine = (): Record<string, unknown> | undefined =>
      gateway
        .output()
        .split('\n')
        .filter((text) => text.startsWith('{'))
        .map((text) => JSON.parse(text) as Record<string, unknown>)
        .find((entry) => entry.msg === 'admin change' && entry.requestId === 'peer-change-1')
    await until(() => changeLine() !== undefined)
    expect(changeLine()).toMatchObject({ endpoint: 'DELETE /admin/sessions', clientAddress: namespace.peerAddress })
    expect(gateway.output()).not.toContain(token)
  })
})
