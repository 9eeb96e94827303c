import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { send, type Answer } from '../helpers/http.js'
import { startRecordingUpstream, type RecordedRequest, type RecordingUpstream } from '../helpers/recording-upstream.js'
import { until, useRedisServer } from '../helpers/redis-server.js'
import { PRODUCTION_NODE_FLAGS } from '../../src/node-flags.js'
import { runCli, spawnCli } from '../helpers/spawn-cli.js'
import type { SpawnedGateway } from '../helpers/spawn-gateway.js'
import { useTempDir } from '../helpers/temp-dir.js'

/*
 * SPEC 16 across replicas: gateway PROCESSES (dist/cli.js, built by test/global-setup.ts) on one
 * real redis-server, and a recording V4 upstream that counts the executions that reached it.
 */

const TOKEN = 'tok-idem-replicas-7c21'
const EXECUTE = '/v1/headless/runs'
const SESSION_EXECUTE = '/v1/runs/invoke'
const START_PATH = '/v4/sessions.start'
const SPAWN_MS = 30_000

const dir = useTempDir('v4gw-idem-replicas-')
const redis = useRedisServer()
let prefixes = 0

function isExecution(request: RecordedRequest): boolean {
  return request.url === '/v4/execute' || request.url.endsWith('/executions.execute')
}

function executions(upstream: RecordingUpstream): number {
  return upstream.requests.filter(isExecution).length
}

function keyed(key: string): Record<string, string> {
  return { authorization: `Bearer ${TOKEN}`, 'idempotency-key': key }
}

interface ReplicaOptions {
  idempotency?: Record<string, unknown>
  limits?: Record<string, unknown>
  shutdown?: Record<string, unknown>
}

/** `count` gateway processes with tenant `acme` on `upstreamUrl`, SPEC 16 on, all on the test's redis-server under one key prefix. */
async function spawnReplicas(count: number, upstreamUrl: string, prefix: string, options: ReplicaOptions = {}): Promise<SpawnedGateway[]> {
  const path = await writeReplicaConfig(upstreamUrl, prefix, options)
  // One after the other: on two busy cores, starting three Node processes at once only makes each slower.
  const replicas: SpawnedGateway[] = []
  for (let index = 0; index < count; index++) replicas.push(await spawnOneProcess(path))
  await Promise.all(replicas.map((replica) => until(async () => (await send(replica.adminUrl, '/metrics')).text.includes('v4gw_store_up 1'), 10_000)))
  return replicas
}

/** The replicas' config file: tenant `acme` on `upstreamUrl` with SPEC 16 on, the test's redis-server under `prefix`. */
async function writeReplicaConfig(upstreamUrl: string, prefix: string, options: ReplicaOptions = {}): Promise<string> {
  const config = {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'info' },
    tenancy: { default: 'acme' },
    store: { kind: 'redis', redis: { url: redis.url, keyPrefix: prefix } },
    // Load shedding on event-loop delay is another test's subject: on two busy cores a process just
    // started can pass the 1 s default and answer 503, which says nothing about SPEC 16.
    limits: { maxEventLoopDelayMs: 60_000, ...options.limits },
    ...(options.shutdown === undefined ? {} : { shutdown: options.shutdown }),
    tenants: { acme: { upstream: { staging: upstreamUrl }, legacy: { idempotency: options.idempotency ?? {} } } }
  }
  return dir.write(`gateway-${prefix.replace(/\W/g, '')}.yaml`, stringify(config))
}

/**
 * `node dist/cli.js` started with the production Node flags, so that it runs as one process (on
 * Node 20 it would otherwise start itself again as a child, and a SIGKILL would reach only the
 * launcher, whose child then drains: not a crash).
 */
async function spawnOneProcess(configPath: string): Promise<SpawnedGateway> {
  const running = await spawnCli(['--config', configPath], { nodeArgs: [...PRODUCTION_NODE_FLAGS] })
  const match = await running.waitFor(/v4gw listening on (\S+) \(admin (\S+)\)/, SPAWN_MS)
  return { child: running.child, url: match[1] as string, adminUrl: match[2] as string, output: running.output, exited: running.exited.then(({ code }) => code) }
}

/** The Redis keys of SPEC 16's family under `prefix`. */
function recordKeys(prefix: string): Promise<string[]> {
  return redis.client().keys(`${prefix}i:*`)
}

/** The SPEC 16 outcomes on the access lines a process printed. */
function outcomes(replica: SpawnedGateway): string[] {
  return replica
    .output()
    .split('\n')
    .filter((line) => line.includes('"msg":"request"'))
    .map((line) => (JSON.parse(line) as { idempotency?: string }).idempotency ?? 'none')
}

describe('SPEC 16 across gateway processes on one redis-server', () => {
  it('runs one V4 execution for 30 concurrent calls with one key spread over 3 processes, and gives all 30 the same answer', { timeout: 120_000 }, async () => {
    let ran = 0
    let release: () => void = () => undefined
    const released = new Promise<void>((resolve) => (release = resolve))
    const upstream = await startRecordingUpstream(async (request, response) => {
      if (isExecution(request)) {
        ran++
        // Held until all 30 are in flight on the three processes: the other 29 meet the claim.
        await released
      }
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ output: `execution ${ran}`, meta: { executionId: `ex-${ran}` } }))
    })
    const prefix = `ir${++prefixes}:`
    const replicas = await spawnReplicas(3, upstream.url, prefix)
    const sent = Promise.all(
      Array.from({ length: 30 }, (_, index) => send((replicas[index % 3] as SpawnedGateway).url, EXECUTE, { headers: keyed('one-key-30-calls'), json: { input: 'same' } }))
    )
    const inFlight = async (replica: SpawnedGateway): Promise<number> => Number(/^v4gw_requests_in_flight (\d+)$/m.exec((await send(replica.adminUrl, '/metrics')).text)?.[1] ?? 0)
    await until(async () => (await Promise.all(replicas.map(inFlight))).reduce((sum, count) => sum + count, 0) === 30, 30_000)
    release()
    const answers: Answer[] = await sent
    expect(executions(upstream)).toBe(1)
    expect(answers.map((answer) => `${answer.status} ${answer.json?.error?.code ?? ''}`.trim())).toEqual(Array<string>(30).fill('200'))
    expect(new Set(answers.map((answer) => answer.text)).size).toBe(1)
    expect(answers[0]?.json.output).toBe('execution 1')
    expect(answers.filter((answer) => answer.headers['idempotent-replayed'] === undefined)).toHaveLength(1)
    await until(() => replicas.flatMap(outcomes).length === 30)
    const seen = replicas.flatMap(outcomes)
    expect(seen.filter((outcome) => outcome === 'executed')).toHaveLength(1)
    // Every other call arrived while the first ran, on its process or another: each waited for it.
    expect(seen.filter((outcome) => outcome === 'waited')).toHaveLength(29)
    const [record] = await recordKeys(prefix)
    expect(record).toBeDefined()
    // Only hashes and the answer reach Redis: never the key, the token or the request body.
    const stored = `${record as string} ${(await redis.client().getBuffer(record as string))?.toString('latin1') ?? ''}`
    for (const secret of ['one-key-30-calls', TOKEN, '"same"']) expect(stored).not.toContain(secret)
  })

  it('answers 409 on another process while a SIGKILLed replica\'s claim lives, and runs the call once after the lease has expired', { timeout: 120_000 }, async () => {
    const upstream = await startRecordingUpstream((request, response) => {
      // The first execution hangs (the replica holding its claim is killed meanwhile); later ones answer.
      if (isExecution(request) && executions(upstream) === 1) return
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end(JSON.stringify({ output: 'second run' }))
    })
    const prefix = `ir${++prefixes}:`
    // Lease 2 × (3000 + 500) = 7 s: long enough to meet it alive after the kill.
    const [doomed, survivor] = (await spawnReplicas(2, upstream.url, prefix, { idempotency: { waitMs: 100 }, limits: { upstreamTimeoutMs: 3_000, connectTimeoutMs: 500 } })) as [SpawnedGateway, SpawnedGateway]
    const cut = send(doomed.url, EXECUTE, { headers: keyed('killed-holder'), json: { input: 1 } }).catch((error: unknown) => error)
    await until(() => executions(upstream) === 1)
    doomed.child.kill('SIGKILL')
    await doomed.exited
    await cut
    const [claim] = await recordKeys(prefix)
    expect(claim).toBeDefined()
    expect(await redis.client().pttl(claim as string)).toBeGreaterThan(0)

    const early = await send(survivor.url, EXECUTE, { headers: keyed('killed-holder'), json: { input: 1 } })
    // Status and code together, so that a failure says which error came instead.
    expect(`${early.status} ${early.json?.error?.code ?? early.text}`).toBe('409 IDEMPOTENCY_IN_PROGRESS')
    expect(early.headers['retry-after']).toBe('1')
    expect(executions(upstream)).toBe(1)

    // Nobody renews the dead replica's claim: Redis's own expiry ends it.
    await until(async () => (await recordKeys(prefix)).length === 0, 15_000, 100)
    const after = await send(survivor.url, EXECUTE, { headers: keyed('killed-holder'), json: { input: 1 } })
    expect(after.status).toBe(200)
    expect(after.headers['idempotent-replayed']).toBeUndefined()
    const again = await send(survivor.url, EXECUTE, { headers: keyed('killed-holder'), json: { input: 1 } })
    expect(again.headers['idempotent-replayed']).toBe('true')
    expect(executions(upstream)).toBe(2)
  })
})

describe('SPEC 16 claims cut at shutdown (a process stopped with SIGTERM, grace over)', () => {
  it('deletes the claim of a request that sent no execution, so that a retry on another process runs at once', { timeout: 120_000 }, async () => {
    const upstream = await startRecordingUpstream((request, response) => {
      // sessions.start hangs: the request never gets as far as its execution.
      if (request.url === START_PATH && upstream.requests.filter((seen) => seen.url === START_PATH).length === 1) return
      response.writeHead(request.url === START_PATH ? 201 : 200, { 'content-type': 'application/json' })
      response.end(JSON.stringify(request.url === START_PATH ? { sessionId: 'ses_after' } : { output: 'ran' }))
    })
    const prefix = `ir${++prefixes}:`
    const [stopping, other] = (await spawnReplicas(2, upstream.url, prefix, { shutdown: { graceMs: 200 }, idempotency: { waitMs: 100 } })) as [SpawnedGateway, SpawnedGateway]
    const cut = send(stopping.url, SESSION_EXECUTE, { headers: keyed('cut-before-execution'), json: { input: 1 } }).catch((error: unknown) => error)
    await until(() => upstream.requests.some((request) => request.url === START_PATH))
    expect(await recordKeys(prefix)).toHaveLength(1)
    stopping.child.kill('SIGTERM')
    await stopping.exited
    await cut
    expect(await recordKeys(prefix)).toEqual([])
    const retry = await send(other.url, SESSION_EXECUTE, { headers: keyed('cut-before-execution'), json: { input: 1 } })
    expect(retry.status).toBe(200)
    expect(executions(upstream)).toBe(1)
  })

  it('deletes the claim of a request still waiting for another replica\'s session start when the grace period ends, before the store closes', { timeout: 120_000 }, async () => {
    // The first sessions.start hangs: the replica that sent it holds the identity's start lock in Redis.
    const upstream = await startRecordingUpstream((request, response) => {
      if (request.url === START_PATH && upstream.requests.filter((seen) => seen.url === START_PATH).length === 1) return
      response.writeHead(request.url === START_PATH ? 201 : 200, { 'content-type': 'application/json' })
      response.end(JSON.stringify(request.url === START_PATH ? { sessionId: 'ses_later' } : { output: 'ran' }))
    })
    const prefix = `ir${++prefixes}:`
    const [lockHolder, stopping] = (await spawnReplicas(2, upstream.url, prefix, { shutdown: { graceMs: 200 } })) as [SpawnedGateway, SpawnedGateway]
    const body = { input: 1, stateId: 'one-identity' }
    void send(lockHolder.url, SESSION_EXECUTE, { headers: { authorization: `Bearer ${TOKEN}` }, json: body }).catch(() => undefined)
    await until(async () => (await redis.client().keys(`${prefix}l:*`)).length === 1)
    // The keyed request claims its key, then waits on the other replica's start lock: no upstream
    // call of its own for the shutdown to fail, so only the cut can let its claim go.
    const cut = send(stopping.url, SESSION_EXECUTE, { headers: keyed('cut-while-waiting'), json: body }).catch((error: unknown) => error)
    await until(async () => (await recordKeys(prefix)).length === 1)
    stopping.child.kill('SIGTERM')
    await stopping.exited
    await cut
    expect(await recordKeys(prefix)).toEqual([])
    expect(executions(upstream)).toBe(0)
  })

  it('leaves the claim of a request whose execution was sent to its expiry: a retry meanwhile is 409, never a second execution', { timeout: 120_000 }, async () => {
    const upstream = await startRecordingUpstream((request, response) => {
      if (isExecution(request)) return
      response.writeHead(200, { 'content-type': 'application/json' })
      response.end('{}')
    })
    const prefix = `ir${++prefixes}:`
    const [stopping, other] = (await spawnReplicas(2, upstream.url, prefix, { shutdown: { graceMs: 200 }, idempotency: { waitMs: 100 } })) as [SpawnedGateway, SpawnedGateway]
    const cut = send(stopping.url, EXECUTE, { headers: keyed('cut-after-execution'), json: { input: 1 } }).catch((error: unknown) => error)
    await until(() => executions(upstream) === 1)
    stopping.child.kill('SIGTERM')
    await stopping.exited
    await cut
    const [claim] = await recordKeys(prefix)
    expect(claim).toBeDefined()
    // Still the claim (not an answer made up at the cut), living on its lease.
    expect((await redis.client().get(claim as string))?.startsWith('c:')).toBe(true)
    expect(await redis.client().pttl(claim as string)).toBeGreaterThan(0)
    const retry = await send(other.url, EXECUTE, { headers: keyed('cut-after-execution'), json: { input: 1 } })
    expect(retry.status).toBe(409)
    expect(retry.json.error.code).toBe('IDEMPOTENCY_IN_PROGRESS')
    expect(executions(upstream)).toBe(1)
  })
})

describe('v4gw explain with store: redis', () => {
  it('reads a keyed request\'s record from Redis, as the gateways would, and says replayed or executed', { timeout: 120_000 }, async () => {
    const upstream = await startRecordingUpstream()
    const prefix = `ir${++prefixes}:`
    const [gateway] = (await spawnReplicas(1, upstream.url, prefix)) as [SpawnedGateway]
    await send(gateway.url, EXECUTE, { headers: keyed('explained-key'), json: { input: 1 } })
    const config = await writeReplicaConfig(upstream.url, prefix)
    const explain = async (key: string) => {
      const run = await runCli(['explain', '--config', config, 'POST', EXECUTE, '--header', `authorization:Bearer ${TOKEN}`, '--header', `idempotency-key:${key}`, '--body', '{"input":1}'])
      expect(run.code).toBe(0)
      return JSON.parse(run.stdout) as { idempotency: { record: string; would: string }; calls: unknown[] }
    }
    const replay = await explain('explained-key')
    expect(replay.idempotency).toMatchObject({ record: 'answer', would: 'replay' })
    expect(replay.calls).toEqual([])
    const fresh = await explain('never-used-key')
    expect(fresh.idempotency).toMatchObject({ record: 'none', would: 'execute' })
    expect(fresh.calls).toHaveLength(1)
    // A look, never a claim: the unused key is still free, and nothing reached the upstream.
    expect(await recordKeys(prefix)).toHaveLength(1)
    expect(executions(upstream)).toBe(1)
  })
})
