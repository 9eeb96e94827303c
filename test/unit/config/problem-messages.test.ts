import { describe, expect, it } from 'vitest'
import { configProblems } from '../../helpers/config-files.js'
import { useTempDir } from '../../helpers/temp-dir.js'

const dir = useTempDir('v4gw-problem-messages-')
let fileCount = 0

async function problemsOf(yaml: string, env: Record<string, string | undefined> = {}): Promise<string[]> {
  return configProblems(await dir.write(`config-${++fileCount}.yaml`, yaml), env)
}

const TENANT = 'tenants:\n  acme:\n    upstream: { staging: http://127.0.0.1:4010 }\n'
const QUOTE = 'cannot parse the file: quote this value: an unquoted ${…} inside { } or [ ] starts a mapping (write "${…}")'

describe('an unquoted ${…} in a YAML flow collection', () => {
  it('is one "quote this value" for SPEC 8\'s admin line pasted as it is, not an error per token after it', async () => {
    const problems = await problemsOf(`admin:        { host: 127.0.0.1, port: 9901, token: \${V4GW_ADMIN_TOKEN:-} }\nlog:          { level: info }\n${TENANT}`)
    expect(problems).toEqual([`${QUOTE} at line 1, column 53`])
  })

  it('is one message for the whole SPEC 8 example pasted as it is', async () => {
    const example = [
      'listen:       { host: 0.0.0.0, port: 8080 }',
      'admin:        { host: 127.0.0.1, port: 9901, token: ${V4GW_ADMIN_TOKEN:-} }',
      'log:          { level: info }',
      'limits:       { bodyBytes: 1048576, upstreamTimeoutMs: 30000, connectTimeoutMs: 5000,',
      '                maxInFlight: 10000, maxEventLoopDelayMs: 1000 }',
      'shutdown:     { graceMs: 10000 }',
      'tenants:',
      '  acme:',
      '    upstream: { staging: http://127.0.0.1:4010, production: null, target: staging }',
      ''
    ].join('\n')
    expect(await problemsOf(example)).toEqual([`${QUOTE} at line 2, column 53`])
  })

  it('is one message for each such placeholder, in a mapping or a list, and the file\'s other errors still come', async () => {
    const problems = await problemsOf(`listen: { port: \${PORT:-8080} }\ninternalAdmin: { pathPrefixes: [/internal, \${PREFIX}] }\nlisten: { host: 0.0.0.0 }\n${TENANT}`)
    expect(problems).toEqual([`${QUOTE} at line 1, column 17`, `${QUOTE} at line 2, column 44`, 'cannot parse the file: Map keys must be unique at line 3, column 1'])
  })

  it('never quotes the placeholder\'s default, which may be a secret', async () => {
    const problems = await problemsOf(`admin: { token: \${V4GW_ADMIN_TOKEN:-key_supersecret42} }\n${TENANT}`)
    expect(problems).toEqual([`${QUOTE} at line 1, column 17`])
    expect(problems.join('\n')).not.toMatch(/supersecret|V4GW_ADMIN_TOKEN/)
  })

  it('is no problem quoted, or in block style', async () => {
    expect(await problemsOf(`admin: { port: "\${ADMIN_PORT:-9901}" }\nlog:\n  level: \${LEVEL:-loud}\n${TENANT}`)).toEqual([expect.stringMatching(/^log\.level: /)])
  })
})

describe('an unknown key', () => {
  it.each([
    ['limits: { upstreamTimeout: 30000 }', 'limits: Unrecognized key: "upstreamTimeout"; did you mean `upstreamTimeoutMs`?'],
    ['listn: { port: 8080 }', '(root): Unrecognized key: "listn"; did you mean `listen`?'],
    ['limits: { maxinflight: 10 }', 'limits: Unrecognized key: "maxinflight"; did you mean `maxInFlight`?'],
    ['sessions: { redis: { keyprefx: "gw:" } }', 'sessions.redis: Unrecognized key: "keyprefx"; did you mean `keyPrefix`?']
  ])('suggests the nearest known key: %s', async (yaml, problem) => {
    expect(await problemsOf(`${yaml}\n${TENANT}`)).toEqual([problem])
  })

  it('suggests keys of a tenant and of a route, through the tenant name and the list index', async () => {
    const yaml = 'tenants:\n  acme:\n    upstream: { stagging: http://127.0.0.1:4010 }\n    legacy:\n      routes:\n        - { method: GET, path: /v1/p, action: proxy, rewrites: /v4/p }\n'
    const problems = await problemsOf(yaml)
    expect(problems).toContain('tenants.acme.upstream: Unrecognized key: "stagging"; did you mean `staging`?')
    expect(problems).toContain('tenants.acme.legacy.routes.0: Unrecognized key: "rewrites"; did you mean `rewrite`?')
  })

  it('suggests nothing when no known key is near, and names each unknown key in a problem of its own', async () => {
    expect(await problemsOf(`limits: { frobnicate: 1, upstreamTimeout: 5 }\n${TENANT}`)).toEqual([
      'limits: Unrecognized key: "frobnicate"',
      'limits: Unrecognized key: "upstreamTimeout"; did you mean `upstreamTimeoutMs`?'
    ])
  })
})

describe('one problem, one message', () => {
  it.each([
    ['a port', 'listen:\n  port: ${PORT}', 'listen.port'],
    ['a log level', 'log:\n  level: ${LEVEL}', 'log.level'],
    ['a tenant name', 'tenancy:\n  default: ${DEFAULT_TENANT}', 'tenancy.default'],
    ['an upstream', 'tenants:\n  other:\n    upstream:\n      staging: ${OTHER_UPSTREAM}', 'tenants.other.upstream.staging']
  ])('reports an unset variable in %s once, not again as the empty value it became', async (_case, yaml, path) => {
    const problems = await problemsOf(`${yaml}\n${yaml.startsWith('tenants') ? '' : TENANT}`)
    expect(problems).toEqual([expect.stringMatching(new RegExp(`^${path.replace(/\./g, '\\.')}: environment variable \\w+ is not set`))])
  })

  it('reports an unset variable under an unknown key as the unknown key', async () => {
    expect(await problemsOf(`limits:\n  upstreamTimeout: \${TIMEOUT}\n${TENANT}`)).toEqual(['limits: Unrecognized key: "upstreamTimeout"; did you mean `upstreamTimeoutMs`?'])
  })

  it('still reports the other problems of the file', async () => {
    expect(await problemsOf(`listen:\n  port: \${PORT}\nlog:\n  level: loud\n${TENANT}`)).toEqual([
      expect.stringMatching(/^listen\.port: environment variable PORT is not set/),
      expect.stringMatching(/^log\.level: /)
    ])
  })
})
