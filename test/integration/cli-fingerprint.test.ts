import { spawnSync } from 'node:child_process'
import { hash } from 'node:crypto'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { parseConfigText } from '../../src/config/load-config.js'
import { ROOT } from '../helpers/spawn-cli.js'

// SPEC 12: `v4gw fingerprint` reads one line from standard input and prints the client id the
// gateway computes; the credential never goes on the command line, nor into the output.

/** `node dist/cli.js fingerprint ...args` with `input` on its standard input. */
function fingerprint(input: string, args: string[] = []): { code: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'fingerprint', ...args], { cwd: ROOT, input, encoding: 'utf8', timeout: 10_000 })
  return { code: result.status, stdout: result.stdout, stderr: result.stderr }
}

const idOf = (token: string): string => `fp:${hash('sha256', token, 'hex').slice(0, 16)}`

describe('v4gw fingerprint (SPEC 12)', () => {
  it('prints the fp: id of a credential read from stdin, one trailing newline and a Bearer or Token scheme removed, never the credential', () => {
    for (const input of ['demo-token-alice', 'demo-token-alice\n', 'demo-token-alice\r\n', 'Bearer demo-token-alice\n', 'tOkEn demo-token-alice']) {
      const result = fingerprint(input)
      expect({ input, ...result }).toEqual({ input, code: 0, stdout: `${idOf('demo-token-alice')}\n`, stderr: '' })
    }
  })

  it('prints what the gateway would accept as an exemption of that client', () => {
    const id = fingerprint('demo-token-alice\n').stdout.trim()
    const yaml = `tenants:\n  acme:\n    upstream: { staging: embedded }\n    legacy:\n      deprecation: { date: "2030-01-01T00:00:00Z", exempt: [{ client: "${id}", until: "2030-06-01T00:00:00Z" }] }\n`
    expect(parseConfigText(yaml, 'fingerprint.yaml', {}).tenants.acme?.legacy.deprecation?.exempt[0]?.client).toBe(id)
  })

  it('prints the hdr: or hdr# id of a header value with --header, the line as it is', () => {
    expect(fingerprint('billing-batch.7\n', ['--header'])).toMatchObject({ code: 0, stdout: 'hdr:billing-batch.7\n' })
    expect(fingerprint('Bearer x\n', ['--header'])).toMatchObject({ code: 0, stdout: `hdr#${hash('sha256', 'Bearer x', 'hex').slice(0, 16)}\n` })
  })

  it('exits 2 on whitespace or control characters inside, or an empty line, and prints nothing of it', () => {
    for (const input of ['two words\n', 'tok\tx', 'a\nb\n', 'tok\u0007x', '\n', '']) {
      const result = fingerprint(input)
      expect({ input, code: result.code, stdout: result.stdout }).toEqual({ input, code: 2, stdout: '' })
      if (input.trim() !== '') expect(result.stderr).not.toContain(input.trim())
    }
  })

  it('refuses a credential given as an argument with 64, without echoing it', () => {
    const result = fingerprint('', ['s3cret-token-in-history'])
    expect(result.code).toBe(64)
    expect(result.stdout).toBe('')
    expect(result.stderr).toContain('read from standard input')
    expect(result.stderr).not.toContain('s3cret-token-in-history')
  })
})
