import { lookup } from 'node:dns/promises'
import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { spawnCli } from '../helpers/spawn-cli.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

const LISTENING_LINE = /^v4gw listening on (.+) \(admin (.+)\) pid \d+$/m

function config(listenHost: string, adminHost: string): string {
  return [`listen: { host: "${listenHost}", port: 0 }`, `admin: { host: "${adminHost}", port: 0 }`, 'log: { level: info }', 'tenants: { acme: { upstream: { staging: "http://127.0.0.1:9" } } }'].join('\n')
}

/** The `v4gw listening` JSON line, once it has reached stdout. */
async function listeningLogLine(output: () => string): Promise<Record<string, unknown>> {
  const find = (): Record<string, unknown> | undefined =>
    output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((line) => line.msg === 'v4gw listening')
  await until(() => find() !== undefined)
  return find() as Record<string, unknown>
}

/** SPEC 18: the start-up line and log name every address each listener is bound to. */
describe('the addresses the gateway says it listens on', () => {
  const dir = useTempDir('v4gw-listen-')

  it('names a wildcard as the wildcard, not as 127.0.0.1, on stdout and in the log', async () => {
    const running = await spawnCli(['--config', await dir.write('wildcard.yaml', config('0.0.0.0', '0.0.0.0'))])
    const [, traffic, adminUrls] = await running.waitFor(LISTENING_LINE)
    expect(traffic).toMatch(/^http:\/\/0\.0\.0\.0:\d+$/)
    expect(adminUrls).toMatch(/^http:\/\/0\.0\.0\.0:\d+$/)
    expect(await listeningLogLine(running.stdout)).toMatchObject({ trafficUrls: [traffic], adminUrls: [adminUrls], trafficUrl: traffic, adminUrl: adminUrls })
    // What it names is where it answers.
    expect((await send(`http://127.0.0.1:${new URL(adminUrls as string).port}`, '/healthz')).status).toBe(200)
  })

  it('names every address a name binds the admin listener to', async () => {
    const running = await spawnCli(['--config', await dir.write('localhost.yaml', config('127.0.0.1', 'localhost'))])
    const [, , adminUrls] = await running.waitFor(LISTENING_LINE)
    const port = new URL((adminUrls as string).split(', ')[0] as string).port
    const expected = (await lookup('localhost', { all: true })).map(({ address, family }) => `http://${family === 6 ? `[${address}]` : address}:${port}`)
    expect((adminUrls as string).split(', ').sort()).toEqual(expected.sort())
    expect((await listeningLogLine(running.stdout)).adminUrls).toEqual((adminUrls as string).split(', '))
  })
})
