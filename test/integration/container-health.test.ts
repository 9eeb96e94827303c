import { writeFile } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { composeFile, imageEntrypoint, imageEnvInCheckout, imageHealthcheck } from '../helpers/container-files.js'
import { freePort } from '../helpers/free-port.js'
import { startHttpServer } from '../helpers/http-server.js'
import { runCli, spawnCli, type RunningCli } from '../helpers/spawn-cli.js'
import { useTempDir } from '../helpers/temp-dir.js'

const LISTENING_LINE = /v4gw listening on (\S+) \(admin (\S+)\)/

/** A command line of `node …` as the given process, in the checkout; resolves with its exit code. */
async function runNodeCommand(command: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  expect(command[0]).toBe('node')
  const cli = command.indexOf('dist/cli.js')
  const running = await spawnCli(command.slice(cli + 1), { env, nodeArgs: cli === -1 ? command.slice(1) : command.slice(1, cli) })
  const { code } = await running.exited
  return { code, output: running.output() }
}

async function startGatewayProcess(args: string[], env: Record<string, string>, nodeArgs: string[] = []): Promise<{ running: RunningCli; adminUrl: string }> {
  const running = await spawnCli(args, { env, nodeArgs })
  const match = await running.waitFor(LISTENING_LINE, 15_000)
  return { running, adminUrl: match[2] as string }
}

function gatewayConfig(adminHost: string, adminPort: string): string {
  return ['listen: { host: 127.0.0.1, port: 0 }', 'admin:', `  host: "${adminHost}"`, `  port: "${adminPort}"`, 'log: { level: warn }', 'tenants: { acme: { upstream: { staging: "http://127.0.0.1:9" } } }', ''].join('\n')
}

/** SPEC 18: `v4gw healthcheck [--config FILE]` probes the admin /healthz the config names. */
describe('v4gw healthcheck', () => {
  const dir = useTempDir('v4gw-healthcheck-')

  it("exits 0 on the gateway's admin port, read from the same config with the same env substitution", async () => {
    const port = String(await freePort())
    const path = await dir.write('placeholders.yaml', gatewayConfig('${HC_ADMIN_HOST:-127.0.0.1}', '${HC_ADMIN_PORT}'))
    const env = { HC_ADMIN_HOST: '0.0.0.0', HC_ADMIN_PORT: port }
    const { adminUrl } = await startGatewayProcess(['--config', path], env)
    expect(adminUrl).toBe(`http://0.0.0.0:${port}`)
    const byFlag = await runCli(['healthcheck', '--config', path], env)
    expect(byFlag.code, byFlag.stderr).toBe(0)
    // A wildcard is dialled on loopback.
    expect(byFlag.stdout).toContain(`healthy: http://127.0.0.1:${port}/healthz answered 200`)
    // The config path as the gateway finds it: V4GW_CONFIG when there is no --config.
    expect((await runCli(['healthcheck'], { ...env, V4GW_CONFIG: path })).code).toBe(0)
  })

  it('stays healthy when an edit breaks the rest of the file, and turns unhealthy once the gateway is gone', async () => {
    const port = String(await freePort())
    const path = await dir.write('edited.yaml', gatewayConfig('127.0.0.1', port))
    const { running } = await startGatewayProcess(['--config', path], {})
    await writeFile(path, `${gatewayConfig('127.0.0.1', port)}limits: { bodyBytes: -1 }\nnot_a_key: 1\ntenancy: { default: \${UNSET_TENANT} }\nextra: [unclosed\n`)
    expect((await runCli(['check-config', path])).code).toBe(2)
    const healthy = await runCli(['healthcheck', '--config', path])
    expect(healthy.code, healthy.stderr).toBe(0)
    await running.kill()
    const gone = await runCli(['healthcheck', '--config', path])
    expect(gone.code).toBe(1)
    expect(gone.stderr).toContain(`unhealthy: http://127.0.0.1:${port}/healthz could not be reached (ECONNREFUSED)`)
  })

  it('exits 1 for a /healthz that answers anything but 200', async () => {
    const server = await startHttpServer((_request, response) => {
      response.statusCode = 503
      response.end()
    })
    const path = await dir.write('unhealthy.yaml', gatewayConfig('127.0.0.1', new URL(server.url).port))
    const result = await runCli(['healthcheck', '--config', path])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('answered 503')
  })

  it('exits 1 within about 2 s when /healthz does not answer', async () => {
    const server = await startHttpServer(() => {
      // Never answers.
    })
    const path = await dir.write('silent.yaml', gatewayConfig('127.0.0.1', new URL(server.url).port))
    const running = await spawnCli(['healthcheck', '--config', path])
    const started = Date.now()
    const { code } = await running.exited
    const elapsed = Date.now() - started
    expect(code).toBe(1)
    expect(running.stderr()).toContain('did not answer within 2000 ms')
    // Node's start comes on top of the probe's 2 s; Docker's timeout in the Dockerfile is 3 s.
    expect(elapsed).toBeGreaterThanOrEqual(2_000)
    expect(elapsed).toBeLessThan(4_500)
  })

  it('exits 1, not 64, for arguments it does not take: Docker reads any other code than 0 and 1 as a failure of its own', async () => {
    const result = await runCli(['healthcheck', '--port', '1'])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain("Unknown option '--port'")
  })
})

/** The image's HEALTHCHECK and entrypoint, run here with the image's environment (no container engine in the tests). */
describe('the image, run as the Dockerfile runs it', () => {
  const dir = useTempDir('v4gw-image-')

  it('binds the admin listener to 0.0.0.0 through V4GW_ADMIN_HOST, and its HEALTHCHECK finds it healthy', async () => {
    const env: Record<string, string> = { ...imageEnvInCheckout(), V4GW_PORT: String(await freePort()), V4GW_ADMIN_PORT: String(await freePort()) }
    expect(env.V4GW_ADMIN_HOST).toBe('0.0.0.0')
    const entrypoint = imageEntrypoint()
    const { adminUrl } = await startGatewayProcess([], env, entrypoint.slice(1, entrypoint.indexOf('dist/cli.js')))
    expect(adminUrl).toBe(`http://0.0.0.0:${env.V4GW_ADMIN_PORT}`)
    const health = await runNodeCommand(imageHealthcheck(), env)
    expect(health.code, health.output).toBe(0)
  })

  it('stays healthy with a mounted config that moves the admin port, which no variable names', async () => {
    const port = String(await freePort())
    const mounted = await dir.write('gateway.yaml', gatewayConfig('0.0.0.0', port))
    const env = { ...imageEnvInCheckout(), V4GW_CONFIG: mounted }
    await startGatewayProcess([], env)
    const health = await runNodeCommand(imageHealthcheck(), env)
    expect(health.code, health.output).toBe(0)
    expect(health.output).toContain(`:${port}/healthz answered 200`)
  })
})

describe("docker-compose.yml's simulator probe", () => {
  /** The probe as Compose runs it (`CMD`, inside the simulator's container), aimed at `port` instead of 4010. */
  function probeAt(port: string): string[] {
    const test = composeFile().services.simulator?.healthcheck?.test ?? []
    expect(test[0]).toBe('CMD')
    const command = test.slice(1)
    expect(command.join(' ')).toContain('127.0.0.1:4010')
    return command.map((word) => word.replaceAll('127.0.0.1:4010', `127.0.0.1:${port}`))
  }

  it('is healthy on the simulator the service runs (`v4gw simulator`)', async () => {
    const simulator = await spawnCli(['simulator', '--host', '127.0.0.1', '--port', '0'])
    const url = (await simulator.waitFor(/v4 simulator listening on (\S+)/))[1] as string
    const probe = await runNodeCommand(probeAt(new URL(url).port), {})
    expect(probe.code, probe.output).toBe(0)
  })

  it('fails on a server that answers 404, as anything that is not the simulator would', async () => {
    const notTheSimulator = await startHttpServer((_request, response) => {
      response.statusCode = 404
      response.end('{"error":"not found"}')
    })
    expect((await runNodeCommand(probeAt(new URL(notTheSimulator.url).port), {})).code).toBe(1)
  })
})
