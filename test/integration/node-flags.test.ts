import { readFileSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { stringify } from 'yaml'
import { PRODUCTION_NODE_FLAGS } from '../../src/node-flags.js'
import { spawnCli } from '../helpers/spawn-cli.js'
import { useTempDir } from '../helpers/temp-dir.js'
import { until } from '../helpers/until.js'

// `node dist/cli.js` and `npx v4gw` run the gateway with the production Node flags, not only
// `npm start` and the Docker image (docs/performance.md): the process that serves says which
// flags it runs with on its `v4gw listening` line.

describe('the production Node flags on a plain start', () => {
  const dir = useTempDir('v4gw-node-flags-')

  async function configFile(): Promise<string> {
    const path = join(dir.path, 'gateway.yaml')
    await writeFile(path, stringify({ listen: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 }, tenancy: { default: 'a' }, tenants: { a: { upstream: { staging: 'http://127.0.0.1:9' } } } }))
    return path
  }

  function listeningLine(stdout: string): { nodeFlags: string[]; pid: number } {
    const line = stdout.split('\n').find((one) => one.includes('"msg":"v4gw listening"'))
    return JSON.parse(line as string) as { nodeFlags: string[]; pid: number }
  }

  it('serves from a process with every production flag when started as `node dist/cli.js`, and stops on SIGTERM with exit 0', async () => {
    const cli = await spawnCli(['--config', await configFile()])
    await cli.waitFor(/"msg":"v4gw listening"/)
    expect(listeningLine(cli.stdout()).nodeFlags).toEqual(expect.arrayContaining([...PRODUCTION_NODE_FLAGS]))
    cli.child.kill('SIGTERM')
    expect(await cli.exited).toEqual({ code: 0, signal: null })
  })

  it('keeps a value the operator chose, on the command line or in NODE_OPTIONS', async () => {
    // NODE_OPTIONS takes only some V8 flags; --max-semi-space-size is one of them.
    const cli = await spawnCli(['--config', await configFile()], { nodeArgs: ['--initial-old-space-size=256'], env: { NODE_OPTIONS: '--max-semi-space-size=16' } })
    await cli.waitFor(/"msg":"v4gw listening"/)
    const { nodeFlags } = listeningLine(cli.stdout())
    expect(nodeFlags).toContain('--no-allocation-site-pretenuring')
    // Not added on the command line, where it would override NODE_OPTIONS' value.
    expect(nodeFlags.filter((flag) => flag.startsWith('--max-semi-space-size') || flag.startsWith('--initial-old-space-size'))).toEqual(['--initial-old-space-size=256'])
  })

  it('starts no second process when the flags are given', async () => {
    const cli = await spawnCli(['--config', await configFile()], { nodeArgs: [...PRODUCTION_NODE_FLAGS] })
    await cli.waitFor(/"msg":"v4gw listening"/)
    expect(readFileSync(`/proc/${cli.child.pid}/task/${cli.child.pid}/children`, 'utf8').trim()).toBe('')
  })

  it('does not leave the gateway running when its launcher is killed outright', async () => {
    const cli = await spawnCli(['--config', await configFile()])
    await cli.waitFor(/"msg":"v4gw listening"/)
    // Where Node has process.execve, the launcher became the gateway: there is no other process.
    const children = readFileSync(`/proc/${cli.child.pid}/task/${cli.child.pid}/children`, 'utf8').trim()
    // The serving process: the launcher's child, or the launcher itself where it became the gateway.
    const gateway = children === '' ? (cli.child.pid as number) : Number(children.split(' ')[0])
    cli.child.kill('SIGKILL')
    await cli.exited
    await until(() => {
      try {
        process.kill(gateway, 0)
        return false
      } catch {
        return true
      }
    }, 15_000)
  })
})
