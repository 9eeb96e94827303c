import { spawn, type ChildProcess } from 'node:child_process'
import { accessSync, constants } from 'node:fs'
import { connect } from 'node:net'
import { delimiter, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Redis } from 'ioredis'
import { freePort } from './free-port.js'
import { send } from './http.js'
import { startGateway, testConfig, useGateway, type StartedGateway } from './start-gateway.js'
import { ownedBySuite, ownedByTest } from './teardown.js'

export const REDIS_SERVER_MISSING =
  'redis-server is not on PATH: the Redis session-store tests need a real server on loopback. ' +
  'Install it with `apt-get install -y redis-server` (Debian/Ubuntu; then `service redis-server stop` if apt started a daemon), ' +
  'or `brew install redis` (macOS). CI installs it in .ci/run.'

export interface StartedRedis {
  readonly url: string
  readonly port: number
  /** Kills the server (SIGKILL, as a crash would) and waits for it to be gone. */
  kill(): Promise<void>
  /** Starts a new, empty server on the same port. */
  restart(): Promise<void>
  /** Stops the server in its tracks (SIGSTOP): connections stay open, nothing is answered, as a hung server. */
  pause(): void
  /** Lets a paused server go on (SIGCONT). */
  resume(): void
  /** One client on this server for tests to look inside, made on first use, disconnected by `stop`. */
  client(): Redis
  /** Teardown: disconnects the clients it made and kills the server if it still runs. */
  stop(): Promise<void>
}

function onPath(command: string): boolean {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    try {
      accessSync(join(dir, command), constants.X_OK)
      return true
    } catch {
      // not in this directory
    }
  }
  return false
}

/** True once the server answers PING (with +PONG, or NOAUTH when it has a password). */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    let reply = ''
    socket.setTimeout(500)
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString('latin1')
      if (reply.includes('\r\n')) {
        socket.destroy()
        // A server with a password answers NOAUTH: it is up all the same.
        resolve(reply.startsWith('+PONG') || reply.startsWith('-NOAUTH'))
      }
    })
    socket.once('timeout', () => {
      socket.destroy()
      resolve(false)
    })
    socket.once('error', () => resolve(false))
  })
}

async function spawnServer(port: number, password: string | undefined): Promise<ChildProcess> {
  // No persistence, loopback only: a throwaway server owned by the test.
  const auth = password === undefined ? [] : ['--requirepass', password]
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...auth], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  let exited = false
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')))
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')))
  child.once('exit', () => (exited = true))
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve))
  const deadline = Date.now() + 5_000
  for (;;) {
    const failed = await Promise.race([spawnError, sleep(20).then(() => undefined)])
    if (failed !== undefined) throw (failed as NodeJS.ErrnoException).code === 'ENOENT' ? new Error(REDIS_SERVER_MISSING) : failed
    if (exited) throw new Error(`redis-server exited before answering PING:\n${output}`)
    if (await ping(port)) return child
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`redis-server did not answer PING on 127.0.0.1:${port} within 5 s:\n${output}`)
    }
  }
}

async function killServer(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGKILL')
  await gone
}

/**
 * A real `redis-server` on a free loopback port, started and stopped by the test that needs it.
 * Without redis-server on PATH this throws a message that says how to get it: the Redis tests
 * fail loudly instead of passing without having run.
 */
async function launchRedisServer(options: { password?: string }): Promise<StartedRedis> {
  if (!onPath('redis-server')) throw new Error(REDIS_SERVER_MISSING)
  const port = await freePort()
  let child: ChildProcess | undefined = await spawnServer(port, options.password)
  // A test process that dies without its teardown must not leave a server behind.
  const killOnExit = (): void => {
    child?.kill('SIGKILL')
  }
  process.once('exit', killOnExit)
  let client: Redis | undefined
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async kill() {
      await killServer(child)
      child = undefined
    },
    async restart() {
      await killServer(child)
      child = await spawnServer(port, options.password)
    },
    pause() {
      child?.kill('SIGSTOP')
    },
    resume() {
      child?.kill('SIGCONT')
    },
    client() {
      if (client === undefined) {
        client = new Redis({ host: '127.0.0.1', port, password: options.password })
        // A test that kills or pauses the server sees its commands fail; the connection's own errors say nothing more.
        client.on('error', () => undefined)
      }
      return client
    },
    async stop() {
      process.off('exit', killOnExit)
      client?.disconnect()
      client = undefined
      await killServer(child)
      child = undefined
    }
  }
}

/** A redis-server for the running test, stopped when it finishes (see ./teardown.ts). */
export function startRedisServer(options: { password?: string } = {}): Promise<StartedRedis> {
  return ownedByTest('startRedisServer', () => launchRedisServer(options), (started) => started.stop())
}

/** A redis-server for every test of the enclosing describe, stopped after the last one. */
export function useRedisServer(options: { password?: string } = {}): StartedRedis {
  return ownedBySuite('useRedisServer', () => launchRedisServer(options), (started) => started.stop())
}

/** The `sessions` config of a gateway on the shared store, merged over `extra`. */
export function redisSessions(url: string, keyPrefix: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...extra, store: 'redis', redis: { url, keyPrefix } }
}

/** What GET /readyz says about the session store. */
export async function readSessionStoreStatus(adminUrl: string): Promise<unknown> {
  return (await send(adminUrl, '/readyz')).json?.sessionStore
}

/** What every replica of a set shares: its upstream, its Redis and key prefix, and config `overrides`. */
export interface ReplicaSet {
  upstreamUrl: string
  redisUrl: string
  keyPrefix: string
  overrides?: Record<string, unknown>
}

function replicaConfig(set: ReplicaSet): Record<string, unknown> {
  return testConfig(set.upstreamUrl, { sessions: redisSessions(set.redisUrl, set.keyPrefix), ...set.overrides })
}

/**
 * `count` gateway replicas in this process (real listeners on loopback), one tenant `acme` on
 * `upstreamUrl`, all on the same Redis and key prefix: what a load balancer would spread over.
 * Closed when the running test finishes.
 */
export async function startReplicas(count: number, upstreamUrl: string, redisUrl: string, keyPrefix: string, overrides: Record<string, unknown> = {}): Promise<StartedGateway[]> {
  const replicas: StartedGateway[] = []
  for (let index = 0; index < count; index++) replicas.push(await startGateway(replicaConfig({ upstreamUrl, redisUrl, keyPrefix, overrides })))
  return replicas
}

/** `count` replicas as `startReplicas` makes them, for every test of the enclosing describe; `set` is read in the beforeAll. */
export function useReplicas(count: number, set: () => ReplicaSet): StartedGateway[] {
  return Array.from({ length: count }, () => useGateway(() => replicaConfig(set())))
}

export { until } from './until.js'
