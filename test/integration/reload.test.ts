import { writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { send } from '../helpers/http.js'
import { answerAfter, startRecordingUpstream, useRecordingUpstream } from '../helpers/recording-upstream.js'
import { redisSessions, startRedisServer } from '../helpers/redis-server.js'
import { startGateway, testConfig, type StartedGateway } from '../helpers/start-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }

describe('hot reload', () => {
  const dir = useTempDir('v4gw-reload-')
  const simA = useSimulator()
  const simB = useSimulator()
  const slow = useRecordingUpstream(answerAfter(150, { output: 'slow', meta: { requestId: 'r', timingMs: { total: 1 } } }))

  function configPath(): string {
    return join(dir.path, 'gateway.yaml')
  }

  async function writeConfig(config: Record<string, unknown>): Promise<void> {
    await writeFile(configPath(), stringify(config))
  }

  /** A gateway that reloads from the file, for the running test. */
  async function start(config: Record<string, unknown>): Promise<StartedGateway> {
    await writeConfig(config)
    return startGateway(config, { configPath: configPath() })
  }

  it('applies a valid file to new requests while requests in flight finish, with zero failures', async () => {
    const gateway = await start(testConfig(slow.url))
    const before = slow.requests.length
    const inFlight = Array.from({ length: 40 }, (_, index) => send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: index } }))
    // Reload only once all 40 are inside the gateway, waiting on the slow upstream.
    await until(() => slow.requests.length >= before + 40, 5_000, 5)
    await writeConfig(testConfig(simA.url))
    const reload = await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })
    expect(reload.json).toMatchObject({ status: 'reloaded', tenants: ['acme'] })
    const during = await Promise.all(Array.from({ length: 20 }, (_, index) => send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: index } })))
    const answers = [...(await Promise.all(inFlight)), ...during]
    expect(answers.filter((answer) => answer.status !== 200)).toEqual([])
    expect(answers.slice(0, 40).every((answer) => answer.json.output === 'slow')).toBe(true)
    expect(during.every((answer) => answer.json.output !== 'slow')).toBe(true)
    // SPEC 9: a reload applied is counted as one.
    expect((await send(gateway.adminUrl, '/metrics')).text).toMatch(/v4gw_config_reloads_total\{result="success"\} 1\n/)
  })

  it('keeps the running config and reports every problem when the file is invalid', async () => {
    const gateway = await start(testConfig(simA.url))
    await writeFile(configPath(), 'tenants:\n  acme:\n    upstream: { staging: not-a-url }\n    surprise: 1\n')
    const reload = await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })
    expect(reload.status).toBe(400)
    expect(reload.json.error.code).toBe('CONFIG_INVALID')
    // The SPEC 6 envelope, content type, request id and all.
    expect(reload.headers['content-type']).toBe('application/json')
    const requestId = reload.headers['x-request-id']
    expect(requestId).toEqual(expect.any(String))
    expect(reload.json).toMatchObject({ status: 'rejected', error: { requestId }, meta: { requestId, timingMs: { total: expect.any(Number) } } })
    expect(reload.json.error.problems).toEqual(expect.arrayContaining([expect.stringContaining('tenants.acme.upstream.staging'), expect.stringContaining('tenants.acme: Unrecognized key')]))
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).status).toBe(200)
    const logged = gateway.logs.lines().find((line) => line.msg === 'config reload rejected; the running config stays')
    expect(logged?.problems).toEqual(reload.json.error.problems)
    expect((await send(gateway.adminUrl, '/metrics')).text).toMatch(/v4gw_config_reloads_total\{result="failure"\} 1/)
  })

  it('reports restart-only keys against the running values on every reload, not against the last file', async () => {
    const running = testConfig(simA.url)
    const gateway = await start(running)
    const reload = async (config: Record<string, unknown>) => {
      await writeConfig(config)
      const before = gateway.logs.lines().length
      const answer = await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })
      expect(answer.json.status).toBe('reloaded')
      // The reload's own `admin change` line (SPEC 14) is a warning too; only the restart warning names keys.
      const warned = gateway.logs.lines().slice(before).filter((line) => line.level === 40 && line.msg !== 'admin change').map((line) => line.keys)
      return { restartRequired: answer.json.restartRequired, warned }
    }
    const changed = testConfig(simA.url, { sessions: { ttlMs: 60_000 }, limits: { connectTimeoutMs: 1_000 } })
    const pending = { restartRequired: ['limits.connectTimeoutMs', 'sessions.ttlMs'], warned: [['limits.connectTimeoutMs', 'sessions.ttlMs']] }
    expect(await reload(changed)).toEqual(pending)
    // Still not in effect: the same file reloaded says so again.
    expect(await reload(changed)).toEqual(pending)
    // Back to the running values: nothing is pending, and nothing is warned of.
    expect(await reload(running)).toEqual({ restartRequired: [], warned: [] })
  })

  it('refuses a legacy upstream on the running traffic listener\'s address, whatever the file says listen is (SPEC 14)', async () => {
    const gateway = await start(testConfig(simA.url))
    const running = new URL(gateway.url)
    const before = gateway.gateway.runtime()
    await writeConfig(testConfig(simA.url, { listen: { host: '127.0.0.1', port: Number(running.port) + 1 }, tenants: { acme: { upstream: { staging: simA.url, legacy: `http://localhost:${running.port}` } } } }))
    const reload = await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })
    expect(reload.status).toBe(400)
    expect(reload.json.error.problems).toEqual([expect.stringMatching(/^tenants\.acme\.upstream\.legacy: this is the running traffic listener's address/)])
    // Nothing of the file applied: the running config serves on (SPEC 8).
    expect(gateway.gateway.runtime()).toBe(before)
  })

  it('does not report a restart-only map written in another order as changed (tracing.headers)', async () => {
    const gateway = await start(testConfig(simA.url, { tracing: { headers: { 'x-a': 'one', 'x-b': 'two' } } }))
    await writeConfig(testConfig(simA.url, { tracing: { headers: { 'x-b': 'two', 'x-a': 'one' } } }))
    expect((await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })).json).toMatchObject({ status: 'reloaded', restartRequired: [] })
    await writeConfig(testConfig(simA.url, { tracing: { headers: { 'x-b': 'two', 'x-a': 'three' } } }))
    expect((await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })).json).toMatchObject({ status: 'reloaded', restartRequired: ['tracing.headers'] })
  })

  it('runs reloads one at a time: a reload that starts while another waits reads the file after it, so the newer file is the one in force', async () => {
    let startCalled = false
    let release: (origin: string) => void = () => {}
    const embeddedStarted = new Promise<string>((resolve) => (release = resolve))
    await writeConfig(testConfig(simA.url))
    const gw = await startGateway(testConfig(simA.url), {
      configPath: configPath(),
      startEmbedded: () => {
        startCalled = true
        return embeddedStarted
      }
    })
    // The first reload's file needs the embedded simulator: that reload waits on its start.
    await writeConfig(testConfig(simA.url, { tenants: { acme: { upstream: { staging: 'embedded' } } } }))
    const first = send(gw.adminUrl, '/admin/reload', { method: 'POST' })
    await until(() => startCalled)
    // Meanwhile the file changes again and a second reload is asked for.
    await writeConfig(testConfig(simB.url, { tenancy: { default: 'newer' }, tenants: { newer: { upstream: { staging: simB.url } } } }))
    const second = send(gw.adminUrl, '/admin/reload', { method: 'POST' })
    // The second has arrived (its admin change line), and had time to read and apply the file if nothing held it.
    await until(() => gw.logs.lines().filter((line) => line.msg === 'admin change' && line.endpoint === 'POST /admin/reload').length === 2)
    await new Promise((resolve) => setTimeout(resolve, 200))
    release(simA.url)
    expect((await first).json.tenants).toEqual(['acme'])
    expect((await second).json.tenants).toEqual(['newer'])
    // The newer file is in force, whichever read finished first.
    expect(Object.keys((await send(gw.adminUrl, '/admin/migration')).json.tenants)).toEqual(['newer'])
  })

  it('drops the session-map entries of a tenant whose upstream changed and keeps the others', async () => {
    const two = (acmeUrl: string) => testConfig(simA.url, { tenants: { acme: { upstream: { staging: acmeUrl } }, beta: { upstream: { staging: simA.url } } } })
    const gateway = await start(two(simA.url))
    await send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 's' } })
    await send(gateway.url, '/v1/runs/invoke', { headers: { ...ALICE, 'x-tenant-id': 'beta' }, json: { input: 1, stateId: 's' } })
    expect(gateway.gateway.sessionStore.countByTenant()).toEqual({ acme: 1, beta: 1 })

    await writeConfig(two(simB.url))
    const reload = await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })
    expect(reload.json.sessionsDropped).toBe(1)
    expect(gateway.gateway.sessionStore.countByTenant()).toEqual({ beta: 1 })

    const answer = await send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 's' } })
    expect(answer.status).toBe(200)
    expect(simB.simulator.countCalls('POST', '/v4/sessions.start')).toBe(1)
  })

  it('counts the entries a shared Redis store dropped for a tenant whose upstream changed', async () => {
    const redis = await startRedisServer()
    const two = (acmeUrl: string) =>
      testConfig(simA.url, { sessions: redisSessions(redis.url, 'reload-test'), tenants: { acme: { upstream: { staging: acmeUrl } }, beta: { upstream: { staging: simA.url } } } })
    const gateway = await start(two(simA.url))
    await until(async () => (await send(gateway.adminUrl, '/readyz')).json.sessionStore.redis === 'up')
    for (const stateId of ['s1', 's2']) await send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId } })
    await send(gateway.url, '/v1/runs/invoke', { headers: { ...ALICE, 'x-tenant-id': 'beta' }, json: { input: 1, stateId: 's' } })
    expect(await gateway.gateway.sessionStore.countByTenant()).toEqual({ acme: 2, beta: 1 })

    await writeConfig(two(simB.url))
    const reload = await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })
    // Until the reload waited for the store, a shared store's count was left out and read 0.
    expect(reload.json).toMatchObject({ status: 'reloaded', sessionsDropped: 2 })
    expect(await gateway.gateway.sessionStore.countByTenant()).toEqual({ beta: 1 })
  })

  it('keeps, in a rolling reload of replicas sharing Redis, the sessions the replicas that reloaded first started on the new upstream', async () => {
    const redis = await startRedisServer()
    const config = (acmeUrl: string) => testConfig(simA.url, { sessions: redisSessions(redis.url, 'rolling-reload'), tenants: { acme: { upstream: { staging: acmeUrl } } } })
    const replicaA = await start(config(simA.url))
    const replicaB = await startGateway(config(simA.url), { configPath: configPath() })
    for (const replica of [replicaA, replicaB]) await until(async () => (await send(replica.adminUrl, '/readyz')).json.sessionStore.redis === 'up')
    const invoke = (replica: StartedGateway) => send(replica.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'rolling' } })
    // The simulators serve the whole suite: count this test's starts only.
    const startsBefore = { a: simA.simulator.countCalls('POST', '/v4/sessions.start'), b: simB.simulator.countCalls('POST', '/v4/sessions.start') }
    const startsOn = (sim: typeof simA, before: number) => sim.simulator.countCalls('POST', '/v4/sessions.start') - before
    expect((await invoke(replicaA)).status).toBe(200)
    expect(startsOn(simA, startsBefore.a)).toBe(1)

    // The tenant moves to simB; replica A reloads first and starts the state's session there.
    await writeConfig(config(simB.url))
    expect((await send(replicaA.adminUrl, '/admin/reload', { method: 'POST' })).json).toMatchObject({ status: 'reloaded', sessionsDropped: 1 })
    expect((await invoke(replicaA)).status).toBe(200)
    expect(startsOn(simB, startsBefore.b)).toBe(1)

    // Replica B reloads later: it drops the sessions of simA, not the one A made on simB.
    expect((await send(replicaB.adminUrl, '/admin/reload', { method: 'POST' })).json).toMatchObject({ status: 'reloaded', sessionsDropped: 0 })
    const answer = await invoke(replicaB)
    expect(answer.status).toBe(200)
    expect(answer.headers['x-v4-session-id']).toBeDefined()
    expect(startsOn(simB, startsBefore.b)).toBe(1)
    expect(await replicaB.gateway.sessionStore.countByTenant()).toEqual({ acme: 1 })
  })

  it('does not let a sessions.start still under way at the old upstream map its session, or hand it to requests after the reload', async () => {
    let releaseOldStart!: () => void
    const oldStartHeld = new Promise<void>((resolve) => (releaseOldStart = resolve))
    const old = await startRecordingUpstream(async (request, response) => {
      if (request.url === '/v4/sessions.start') await oldStartHeld
      const body = request.url === '/v4/sessions.start' ? { sessionId: 'ses_old_upstream' } : { output: 'old', meta: { requestId: 'r', timingMs: { total: 1 } } }
      response.writeHead(request.url === '/v4/sessions.start' ? 201 : 200, { 'content-type': 'application/json' })
      response.end(JSON.stringify(body))
    })
    try {
      const gateway = await start(testConfig(old.url))
      const invoke = () => send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 1, stateId: 'moving' } })
      const beforeReload = invoke()
      await until(() => old.requests.some((request) => request.url === '/v4/sessions.start'))

      await writeConfig(testConfig(simB.url))
      expect((await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })).json.status).toBe('reloaded')
      const startsAtB = simB.simulator.countCalls('POST', '/v4/sessions.start')
      const afterReload = invoke()
      // Started at the new upstream, not waiting on the old one's start.
      await until(() => simB.simulator.countCalls('POST', '/v4/sessions.start') === startsAtB + 1)
      releaseOldStart()

      const [first, second] = await Promise.all([beforeReload, afterReload])
      // The request that began before the reload finishes where it began.
      expect(first.status).toBe(200)
      expect(first.headers['x-v4-session-id']).toBe('ses_old_upstream')
      expect(first.json.output).toBe('old')
      expect(second.status).toBe(200)
      const newSession = second.headers['x-v4-session-id']
      expect(newSession).not.toBe('ses_old_upstream')

      // The old start answered after the reload: its session is not mapped, the new one is.
      const third = await invoke()
      expect(third.headers['x-v4-session-id']).toBe(newSession)
      expect(simB.simulator.countCalls('POST', '/v4/sessions/ses_old_upstream/executions.execute')).toBe(0)
      expect(simB.simulator.countCalls('POST', '/v4/sessions.start')).toBe(startsAtB + 1)
    } finally {
      // A start still held would keep the gateway's close waiting on it.
      releaseOldStart()
    }
  })

  it('keeps a request that began before the reload, and its session, on the old upstream even when its body ends after it', async () => {
    const gateway = await start(testConfig(simA.url))
    const body = JSON.stringify({ input: 1, stateId: 'straddling' })
    const { hostname, port } = new URL(gateway.url)
    const socket = connect({ host: hostname, port: Number(port) })
    const answered = new Promise<string>((resolve) => {
      let text = ''
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')))
      socket.on('end', () => resolve(text))
    })
    // The tenant, and so its upstream, is resolved from the head; the body comes after the reload.
    const headRead = new Promise((resolve) => gateway.gateway.trafficServer.once('request', resolve))
    socket.write(`POST /v1/runs/invoke HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer demo-token-alice\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`)
    // The head is read (the gateway's own 'request' listener, which plans it, came first).
    await headRead
    await writeConfig(testConfig(simB.url))
    expect((await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })).json.status).toBe('reloaded')
    socket.write(body.slice(5))
    const first = await answered
    expect(first).toMatch(/^HTTP\/1\.1 200/)
    const oldSession = /x-v4-session-id: (\S+)/i.exec(first)?.[1]
    expect(simA.simulator.countCalls('POST', `/v4/sessions/${String(oldSession)}/executions.execute`)).toBe(1)

    // After the reload the same identity and state get a session of the new upstream, started there.
    const startsAtB = simB.simulator.countCalls('POST', '/v4/sessions.start')
    const after = await send(gateway.url, '/v1/runs/invoke', { headers: ALICE, json: { input: 2, stateId: 'straddling' } })
    expect(after.status).toBe(200)
    expect(after.headers['x-v4-session-id']).not.toBe(oldSession)
    expect(simB.simulator.countCalls('POST', '/v4/sessions.start')).toBe(startsAtB + 1)
    expect(simB.simulator.countCalls('POST', `/v4/sessions/${String(oldSession)}/executions.execute`)).toBe(0)
  })

  it('applies a changed route table on reload', async () => {
    const gateway = await start(testConfig(simA.url))
    expect((await send(gateway.url, '/v0/jobs', { headers: ALICE, json: { input: 1 } })).status).toBe(404)
    await writeConfig(testConfig(simA.url, { tenants: { acme: { upstream: { staging: simA.url }, legacy: { routes: [{ method: 'POST', path: '/v0/jobs', action: 'execute' }] } } } }))
    expect((await send(gateway.adminUrl, '/admin/reload', { method: 'POST' })).status).toBe(200)
    expect((await send(gateway.url, '/v0/jobs', { headers: ALICE, json: { input: 1 } })).status).toBe(200)
    expect((await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 1 } })).json.error.code).toBe('ROUTE_NOT_FOUND')
  })
})
