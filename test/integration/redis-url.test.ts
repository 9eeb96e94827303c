import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { send } from '../helpers/http.js'
import { readSessionStoreStatus, startRedisServer, until, type StartedRedis } from '../helpers/redis-server.js'
import { spawnGateway, type SpawnedGateway } from '../helpers/spawn-gateway.js'
import { startSimulator, type StartedSimulator } from '../helpers/start-simulator.js'

// A backslash: Node's legacy url.parse (ioredis's) reads it as a slash, the WHATWG parser (the config's) as a character.
const PASSWORD = 'Zq\\9x-redis-url-secret'

/*
 * The Redis URL is read once, by the parser that validated it, so that the password never reaches
 * a log (SPEC 9: credentials never appear). Handed the raw URL, ioredis re-read it with url.parse, connected elsewhere, and Node's
 * deprecation warning printed the whole URL, password included, on stderr.
 */
describe('a Redis URL whose password the two URL parsers read differently', () => {
  let dir: string
  let redis: StartedRedis
  let sim: StartedSimulator
  let gateway: SpawnedGateway | undefined

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'v4gw-redis-url-'))
    redis = await startRedisServer({ password: PASSWORD })
    sim = await startSimulator()
  })
  afterAll(async () => {
    gateway?.kill()
    await gateway?.exited
    await Promise.all([redis.stop(), sim.close()])
    await rm(dir, { recursive: true, force: true })
  })

  it('connects with that password and never prints it', async () => {
    const config = {
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      tenancy: { default: 'acme' },
      sessions: { store: 'redis', redis: { url: `redis://:${PASSWORD}@127.0.0.1:${redis.port}` } },
      tenants: { acme: { upstream: { staging: sim.url } } }
    }
    const path = join(dir, 'gateway.yaml')
    await writeFile(path, stringify(config))
    gateway = await spawnGateway(path)
    await until(async () => JSON.stringify(await readSessionStoreStatus(gateway!.adminUrl)) === '{"kind":"redis","redis":"up"}')
    const answer = await send(gateway.url, '/v1/runs/invoke', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: 1, stateId: 'url-check' } })
    expect(answer.status).toBe(200)
    expect(gateway.output()).not.toContain('redis-url-secret')
    expect(gateway.output()).not.toContain('DEP0170')
  })
})
