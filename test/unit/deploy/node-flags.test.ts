import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { PRODUCTION_NODE_FLAGS } from '../../../src/node-flags.js'

const root = new URL('../../../', import.meta.url)

/** The words between `node` and `dist/cli.js` of a launch command. */
function flagsBeforeCli(words: string[]): string[] {
  expect(words[0]).toBe('node')
  const cli = words.indexOf('dist/cli.js')
  expect(cli).toBeGreaterThan(0)
  return words.slice(1, cli)
}

/**
 * The gateway's production Node flags (src/node-flags.ts) are the same wherever it is launched:
 * `npm start` and the Docker image pass them (no relaunch), a plain start gets them from the CLI.
 */
describe('production Node flags', () => {
  const packageJson = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { scripts: Record<string, string> }
  const startFlags = flagsBeforeCli(packageJson.scripts.start!.split(' '))

  it('npm start gives the gateway a 32 MiB young generation, a 128 MiB first old-space limit and no allocation-site pretenuring', () => {
    expect(startFlags).toEqual(['--max-semi-space-size=32', '--initial-old-space-size=128', '--no-allocation-site-pretenuring'])
    expect(startFlags).toEqual(PRODUCTION_NODE_FLAGS)
  })

  it('the Docker image starts the gateway with the same flags as npm start', () => {
    const dockerfile = readFileSync(new URL('Dockerfile', root), 'utf8')
    const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(dockerfile)
    expect(entrypoint).not.toBeNull()
    expect(flagsBeforeCli(JSON.parse(entrypoint![1]!) as string[])).toEqual(startFlags)
  })
})
