import { writeFile } from 'node:fs/promises'
import { connect, createServer as createNetServer, type AddressInfo } from 'node:net'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { request as undiciRequest } from 'undici'
import { afterEach, describe, expect, it, onTestFinished } from 'vitest'
import { stringify } from 'yaml'
import { send } from '../helpers/http.js'
import { buildRawRequest, rawExchange } from '../helpers/raw-http.js'
import { until } from '../helpers/until.js'
import { answerAfter, startRecordingUpstream, useRecordingUpstream } from '../helpers/recording-upstream.js'
import { spawnCli } from '../helpers/spawn-cli.js'
import { spawnGateway, type SpawnedGateway } from '../helpers/spawn-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { useTempDir } from '../helpers/temp-dir.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }

function processConfig(upstreamUrl: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'info' },
    tenancy: { default: 'acme' },
    tenants: { acme: { upstream: { staging: upstreamUrl } } },
    ...extra
  }
}


describe('the gateway process and its signals', () => {
  const dir = useTempDir('v4gw-signals-')
  const sim = useSimulator()
  const finished = answerAfter(0, { output: 'finished', meta: { requestId: 'r', timingMs: { total: 1 } } })
  // Answers after 700 ms, or when a test that holds it releases it: then however slow the machine,
  // the request is still in flight while the test looks at the drain.
  let held: Promise<void> | undefined
  const slow = useRecordingUpstream((request, response, raw) => {
    void (held ?? new Promise((resolve) => setTimeout(resolve, 700))).then(() => finished(request, response, raw))
  })
  let releaseHeld: () => void = () => undefined
  /** Holds the slow upstream's answers until the returned function is called (or the test ends). */
  function holdSlow(): () => void {
    let release: () => void = () => undefined
    held = new Promise((resolve) => {
      release = resolve
    })
    releaseHeld = () => {
      held = undefined
      release()
    }
    return releaseHeld
  }
  afterEach(() => releaseHeld())
  const stalled = useRecordingUpstream(() => undefined)

  async function spawnWith(name: string, config: Record<string, unknown>): Promise<SpawnedGateway> {
    return spawnGateway(await dir.write(name, stringify(config)))
  }

  it('names the target and origin of every tenant in its start-up log (SPEC 3)', async () => {
    const gateway = await spawnWith(
      'startup.yaml',
      processConfig(sim.url, {
        tenants: {
          acme: { upstream: { staging: sim.url } },
          globex: { upstream: { staging: slow.url, production: sim.url, target: 'production', legacy: stalled.url } }
        }
      })
    )
    const tenantLines = (): Array<Record<string, unknown>> =>
      gateway
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line.msg === 'tenant upstream')
    // The log is written in batches: the lines may follow the "listening" banner.
    await until(() => tenantLines().length === 2)
    const lines = tenantLines()
    const origin = (url: string): string => new URL(url).origin
    expect(lines.map(({ tenant, target, origin: at, legacyOrigin }) => ({ tenant, target, origin: at, legacyOrigin }))).toEqual([
      { tenant: 'acme', target: 'staging', origin: origin(sim.url), legacyOrigin: undefined },
      { tenant: 'globex', target: 'production', origin: origin(sim.url), legacyOrigin: origin(stalled.url) }
    ])
  })

  it('lets an in-flight slow request finish on SIGTERM, turns readiness false, and exits 0', async () => {
    const gateway = await spawnWith('drain.yaml', processConfig(slow.url))
    expect((await send(gateway.adminUrl, '/readyz')).status).toBe(200)
    const before = slow.requests.length
    const release = holdSlow()
    const inFlight = send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 'slow' } })
    await until(() => slow.requests.length > before)

    gateway.child.kill('SIGTERM')
    // A 503 while the request is still in flight (the admin listener stays up until it ends): a
    // refused connection would say only that the admin listener had closed.
    await until(async () => (await send(gateway.adminUrl, '/readyz').catch(() => ({ status: 0 }))).status === 503)
    release()
    const answer = await inFlight
    expect(answer.status).toBe(200)
    expect(answer.json.output).toBe('finished')
    expect(await gateway.exited).toBe(0)
  })

  it('ignores a second SIGTERM or SIGINT while draining: the request in flight still finishes, and the exit is 0', async () => {
    const gateway = await spawnWith('twice.yaml', processConfig(slow.url))
    const before = slow.requests.length
    const release = holdSlow()
    const inFlight = send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 'slow' } })
    await until(() => slow.requests.length > before)
    gateway.child.kill('SIGTERM')
    await until(() => gateway.output().includes('draining: readiness is false'))
    gateway.child.kill('SIGTERM')
    gateway.child.kill('SIGINT')
    // The signals have been taken (or ignored) before the request ends.
    await new Promise((resolve) => setTimeout(resolve, 200))
    release()
    const answer = await inFlight
    expect(answer.status).toBe(200)
    expect(answer.json.output).toBe('finished')
    expect(await gateway.exited).toBe(0)
    expect(gateway.output()).toContain('already draining; the signal changes nothing')
  })

  it('cuts requests still open after shutdown.graceMs, still exits 0, and writes an access line for each', async () => {
    const gateway = await spawnWith('grace.yaml', processConfig(stalled.url, { shutdown: { graceMs: 200 } }))
    const before = stalled.requests.length
    const hanging = [
      send(gateway.url, '/v1/headless/runs', { headers: { ...ALICE, 'x-request-id': 'cut-legacy' }, json: { input: 'never' } }).catch((error: unknown) => error),
      send(gateway.url, '/v4/execute', { headers: { ...ALICE, 'x-request-id': 'cut-native' }, json: { input: 'never' } }).catch((error: unknown) => error)
    ]
    await until(() => stalled.requests.length >= before + 2)
    const signalledAt = Date.now()
    gateway.child.kill('SIGTERM')
    expect(await gateway.exited).toBe(0)
    expect(Date.now() - signalledAt).toBeLessThan(5_000)
    await Promise.all(hanging)
    // SPEC 9: one line per request, a cut one too (499: no answer was written).
    const lines = gateway
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    const accessLines = lines.filter((line) => line.msg === 'request' && String(line.requestId).startsWith('cut-'))
    expect(accessLines.map((line) => [line.requestId, line.status]).sort()).toEqual([
      ['cut-legacy', 499],
      ['cut-native', 499]
    ])
  })

  // RFC 9112 6.3: an answer of unknown length to an HTTP/1.0 client ends where its connection
  // does: the cut resets it, so the part sent cannot pass for the whole.
  it('resets, at the end of shutdown.graceMs, the connection of a close-delimited answer under way', async () => {
    const upstream = await startRecordingUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' })
      response.write('{"output":')
    })
    const gateway = await spawnWith('grace-http10.yaml', processConfig(upstream.url, { shutdown: { graceMs: 200 } }))
    const body = '{"input":1}'
    const cut = rawExchange(
      gateway.url,
      buildRawRequest('POST /v4/execute HTTP/1.0', [['host', 'gw.test'], ['authorization', ALICE.authorization], ['content-type', 'application/json'], ['content-length', String(body.length)]], body),
      { timeoutMs: 5_000 }
    )
    await until(() => upstream.requests.length > 0)
    // The part sent has reached the client before the signal.
    await new Promise((resolve) => setTimeout(resolve, 200))
    gateway.child.kill('SIGTERM')
    const result = await cut
    expect(await gateway.exited).toBe(0)
    expect(result.bytes.toString('latin1')).toMatch(/^HTTP\/1\.1 200 [^]*\r\n\r\n\{"output":$/)
    expect(result.errorCode).toBe('ECONNRESET')
  })

  it.each([
    { name: 'headers half sent', bytes: 'GET /healthz HTTP/1.1\r\nhost: admin\r\n' },
    { name: 'body half sent', bytes: 'POST /explain HTTP/1.1\r\nhost: admin\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"pa' }
  ])('cuts an admin request still arriving after shutdown.graceMs ($name) and exits 0', async ({ bytes }) => {
    const gateway = await spawnWith('grace-admin.yaml', processConfig(stalled.url, { shutdown: { graceMs: 200 } }))
    // A request the upstream never answers keeps the traffic listener draining until the cut, so the
    // admin request below is read well before the admin listener closes (not refused with a 503).
    const before = stalled.requests.length
    const hanging = send(gateway.url, '/v4/execute', { headers: ALICE, json: { input: 'never' } }).catch((error: unknown) => error)
    await until(() => stalled.requests.length > before)
    const admin = new URL(gateway.adminUrl)
    const socket = connect(Number(admin.port), admin.hostname)
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    socket.on('error', () => undefined)
    // Read whatever comes (a 503 if the request is read only once the admin listener closes), or 'close' never fires.
    socket.resume()
    await new Promise<void>((resolve) => socket.once('connect', resolve))
    socket.write(bytes)
    const signalledAt = Date.now()
    gateway.child.kill('SIGTERM')
    expect(await gateway.exited).toBe(0)
    expect(Date.now() - signalledAt).toBeLessThan(5_000)
    await Promise.all([closed, hanging])
  })

  it.each([
    { clientLeft: false, name: 'its client still waiting' },
    { clientLeft: true, name: 'its client gone before the signal' }
  ])('cuts a shared sessions.start still under way after shutdown.graceMs ($name), rather than waiting for limits.upstreamTimeoutMs', async ({ clientLeft }) => {
    // The start is shared by every waiter on its key, so no client going away cancels it.
    const gateway = await spawnWith('grace-start.yaml', processConfig(stalled.url, { shutdown: { graceMs: 200 }, limits: { upstreamTimeoutMs: 20_000 } }))
    const before = stalled.requests.length
    const leaving = new AbortController()
    const hanging = undiciRequest(`${gateway.url}/v1/runs/invoke`, {
      method: 'POST',
      headers: { ...ALICE, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'never', stateId: `grace-${String(clientLeft)}` }),
      signal: leaving.signal
    }).catch((error: unknown) => error)
    await until(() => stalled.requests.some((request, index) => index >= before && request.url === '/v4/sessions.start'))
    if (clientLeft) {
      leaving.abort()
      await hanging
    }
    const signalledAt = Date.now()
    gateway.child.kill('SIGTERM')
    expect(await gateway.exited).toBe(0)
    expect(Date.now() - signalledAt).toBeLessThan(5_000)
    await hanging
  })

  it('holds a SIGHUP that comes while it starts, rather than dying of it, and drains on a SIGTERM after', async () => {
    // A Redis that accepts connections and never answers: the start waits out its first attempt.
    const silent = createNetServer(() => undefined)
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => void silent.close())
    const { port } = silent.address() as AddressInfo
    const path = await dir.write('early-signal.yaml', stringify(processConfig(slow.url, { sessions: { store: 'redis', redis: { url: `redis://127.0.0.1:${port}` } } })))
    const running = await spawnCli(['--config', path])
    // Generous, as the waits below: test files run side by side, and on 2 cores a process can take
    // more than 5 s to load its modules (CI at eb6fc4d).
    await until(() => running.output().includes('v4gw starting'), 10_000)
    expect(running.output()).not.toContain('v4gw listening')
    running.child.kill('SIGHUP')
    // Generous: the start waits out a Redis attempt first, and test files run side by side.
    await until(() => running.output().includes('v4gw listening'), 10_000)
    await until(() => running.output().includes('config reloaded'), 10_000)
    expect(running.child.exitCode).toBeNull()
    running.child.kill('SIGTERM')
    expect((await running.exited).code).toBe(0)
  })

  it.each([
    { signal: 'SIGHUP', then: 'reloads once up', logged: 'config reloaded' },
    { signal: 'SIGTERM', then: 'drains once up', logged: 'stopped' }
  ])('holds a $signal that comes while the CLI loads its modules and $then, exiting 0', async ({ signal, logged }) => {
    const path = await dir.write(`loading-${signal}.yaml`, stringify(processConfig(slow.url)))
    const hook = fileURLToPath(new URL('../helpers/signal-while-loading.mjs', import.meta.url))
    const running = await spawnCli(['--config', path], { nodeArgs: ['--import', pathToFileURL(hook).href], env: { SIGNAL_WHILE_LOADING: signal } })
    const { child, output } = running
    await until(() => output().includes(logged) || child.exitCode !== null || child.signalCode !== null, 10_000)
    expect(output()).toContain(`sending ${signal} while fastify loads`)
    expect(output()).toContain('v4gw listening')
    if (signal === 'SIGHUP') {
      expect(child.exitCode).toBeNull()
      child.kill('SIGTERM')
    }
    expect(await running.exited).toEqual({ code: 0, signal: null })
    expect(output()).toContain(logged)
  })

  it('re-reads the config file on SIGHUP and sends new requests to the new upstream', async () => {
    const path = await dir.write('hup.yaml', stringify(processConfig(slow.url)))
    const gateway = await spawnGateway(path)
    await writeFile(path, stringify(processConfig(sim.url)))
    gateway.child.kill('SIGHUP')
    await until(async () => {
      const answer = await send(gateway.url, '/v1/headless/runs', { headers: ALICE, json: { input: 'after' } })
      return answer.json?.effective !== undefined
    })
    // Log lines are written in batches, at most 250 ms late.
    await until(() => gateway.output().includes('config reloaded'))
  })
})
