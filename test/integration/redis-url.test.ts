import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { send } from '../helpers/http.js'
import { readSessionStoreStatus, until, useRedisServer } from '../helpers/redis-server.js'
import { spawnGateway } from '../helpers/spawn-gateway.js'
import { useSimulator } from '../helpers/start-simulator.js'
import { useTempDir } from '../helpers/temp-dir.js'

// A backslash: Node's legacy url.parse (ioredis's) reads it as a slash, the WHATWG parser (the config's) as a character.
const PASSWORD = 'Zq\\9x-redis-url-secret'

/*
 * The Redis URL is read once, by the parser that validated it, so that the password never reaches
 * a log (SPEC 9: credentials never appear). Handed the raw URL, ioredis re-read it with url.parse, connected elsewhere, and Node's
 * deprecation warning printed the whole URL, password included, on stderr.
 */
describe('a Redis URL whose password the two URL parsers read differently', () => {
  const dir = useTempDir('v4gw-redis-url-')
  const redis = useRedisServer({ password: PASSWORD })
  const sim = useSimulator()

  it('connects with that password and never prints it', async () => {
    const config = {
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      tenancy: { default: 'acme' },
      sessions: { store: 'redis', redis: { url: `redis://:${PASSWORD}@127.0.0.1:${redis.port}` } },
      tenants: { acme: { upstream: { staging: sim.url } } }
    }
    const gateway = await spawnGateway(await dir.write('gateway.yaml', stringify(config)))
    await until(async () => JSON.stringify(await readSessionStoreStatus(gateway.adminUrl)) === '{"kind":"redis","redis":"up"}')
    const answer = await send(gateway.url, '/v1/runs/invoke', { headers: { authorization: 'Bearer demo-token-alice' }, json: { input: 1, stateId: 'url-check' } })
    expect(answer.status).toBe(200)
    expect(gateway.output()).not.toContain('redis-url-secret')
    expect(gateway.output()).not.toContain('DEP0170')
    // The lines of an outage and of the recovery name the server too (SPEC 12: once per change of state), never its password.
    await redis.kill()
    await until(() => gateway.output().includes('store redis is down'))
    await redis.restart()
    await until(() => gateway.output().split('store redis is up').length > 2)
    expect(gateway.output()).toContain('127.0.0.1')
    expect(gateway.output()).not.toContain('redis-url-secret')
  })
})
