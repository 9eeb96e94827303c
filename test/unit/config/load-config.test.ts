import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { DEFAULT_CONFIG_PATH, loadConfig, resolveConfigPath } from '../../../src/config/load-config.js'
import { configError, MINIMAL_YAML } from '../../helpers/config-files.js'
import { useTempDir } from '../../helpers/temp-dir.js'

const dir = useTempDir('v4gw-load-config-')

function writeTemp(name: string, text: string): Promise<string> {
  return dir.write(name, text)
}

describe('loadConfig reads files', () => {
  it('reads a YAML file', async () => {
    const config = await loadConfig(await writeTemp('minimal.yaml', MINIMAL_YAML), {})
    expect(config.tenants.acme?.upstream.staging).toBe('http://127.0.0.1:4010')
  })

  it('reads a .yml file as YAML', async () => {
    const config = await loadConfig(await writeTemp('minimal.yml', MINIMAL_YAML), {})
    expect(config.tenants.acme?.upstream.staging).toBe('http://127.0.0.1:4010')
  })

  it('reads a JSON file', async () => {
    const path = await writeTemp('minimal.json', JSON.stringify({ listen: { port: 8181 }, tenants: { acme: { upstream: { staging: 'http://127.0.0.1:4011' } } } }))
    const config = await loadConfig(path, {})
    expect(config.listen.port).toBe(8181)
    expect(config.tenants.acme?.upstream.staging).toBe('http://127.0.0.1:4011')
  })

  it('substitutes ${NAME} in a JSON file too', async () => {
    const path = await writeTemp('env.json', JSON.stringify({ tenants: { acme: { upstream: { staging: '${UPSTREAM}' } } } }))
    const config = await loadConfig(path, { UPSTREAM: 'http://127.0.0.1:4012' })
    expect(config.tenants.acme?.upstream.staging).toBe('http://127.0.0.1:4012')
  })

  it('rejects a missing file with CONFIG_INVALID naming the read failure', async () => {
    const error = await configError(join(dir.path, 'does-not-exist.yaml'))
    expect(error.code).toBe('CONFIG_INVALID')
    expect(error.problems).toEqual(['cannot read the file: ENOENT'])
  })

  it('rejects a file that is not YAML with CONFIG_INVALID', async () => {
    const error = await configError(await writeTemp('broken.yaml', 'tenants: [unclosed\n  - {'))
    expect(error.code).toBe('CONFIG_INVALID')
    // Every error yaml found, each with its place.
    expect(error.problems.length).toBeGreaterThan(0)
    for (const problem of error.problems) expect(problem).toMatch(/^cannot parse the file: .* at line \d+, column \d+$/)
  })

  it('rejects a file that is not JSON with CONFIG_INVALID', async () => {
    const error = await configError(await writeTemp('broken.json', '{ "tenants": '))
    expect(error.problems[0]).toMatch(/^cannot parse the file: /)
  })

  it('says where a JSON file breaks, by line and column', async () => {
    const error = await configError(await writeTemp('position.json', '{\n  "listen": { "port": 8080 } x\n}'))
    expect(error.problems).toEqual(["cannot parse the file: Expected ',' or '}' after property value at line 2, column 30"])
  })

  // V8 names no position for an unexpected token: the loader finds it.
  it.each([
    ['a bare word', '{"listen": {"port": 0},\n "tenants": x\n}', 'line 2, column 13'],
    ['an unquoted secret', '{"admin": {"token": key_supersecret42}}', 'line 1, column 21'],
    ['a cut literal', '{\n  "admin": {"token": tru}\n}', 'line 2, column 25'],
    ['a stray character at the start', '\n\n@{}', 'line 3, column 1']
  ])('says where a JSON file has an unexpected token: %s', async (_case, text, where) => {
    const error = await configError(await writeTemp('token-position.json', text))
    expect(error.problems).toEqual([`cannot parse the file: Unexpected token at ${where}`])
  })

  // A parse error goes to the log: the file's own text, where a secret may be written, stays out of it.
  it.each([
    ['a JSON token V8 would quote', 'token.json', '{"admin": {"token": key_supersecret42}}'],
    ['a short JSON file V8 would quote whole', 'whole.json', 'key_supersecret42'],
    ['an unterminated YAML string', 'quote.yaml', 'admin:\n  token: "key_supersecret42\n'],
    ['an unknown YAML tag', 'tag.yaml', 'admin:\n  token: !key_supersecret42 x\n'],
    ['a YAML alias without its anchor', 'alias.yaml', 'admin:\n  token: *key_supersecret42\n'],
    ['a YAML block scalar header', 'block.yaml', 'admin:\n  token: |key_supersecret42\n    x\n'],
    ['a YAML escape sequence (yaml quotes up to eight characters of a \\U one)', 'escape.yaml', 'admin:\n  token: "\\Ukey_supersecret42"\n'],
    ['a YAML directive', 'directive.yaml', '%key_supersecret42 x\n---\nadmin: {}\n']
  ])('never echoes the file in a parse error: %s', async (_case, name, text) => {
    const warnings: unknown[] = []
    const onWarning = (warning: unknown): number => warnings.push(warning)
    process.on('warning', onWarning)
    try {
      const error = await configError(await writeTemp(name, text))
      expect(error.problems.length).toBeGreaterThan(0)
      for (const problem of error.problems) expect(problem).toMatch(/^cannot parse the file: /)
      expect(error.message).not.toMatch(/key_su|supersecret/)
      // yaml prints its warnings with the offending line unless told not to.
      await new Promise((resolve) => setImmediate(resolve))
      expect(warnings).toEqual([])
    } finally {
      process.off('warning', onWarning)
    }
  })

  it.each([
    ['JSON 100,000 levels deep', 'deep.json', `{"tenants": ${'['.repeat(100_000)}${']'.repeat(100_000)}}`],
    ['YAML 65 levels deep', 'deep.yaml', `tenants: ${'['.repeat(64)}${']'.repeat(64)}\n`]
  ])('reports a file nested deeper than 64 levels as a problem, not a stack overflow: %s', async (_case, name, text) => {
    const error = await configError(await writeTemp(name, text))
    expect(error.problems).toEqual(['cannot parse the file: it nests mappings and lists deeper than 64 levels'])
  })

  it('says why a key of a record is refused, in the key rule\'s own words', async () => {
    const tenant = await configError(await writeTemp('tenant-name.yaml', 'tenants:\n  "acme corp":\n    upstream:\n      staging: http://127.0.0.1:4010\n'))
    expect(tenant.problems).toEqual(['tenants.acme…: invalid key: tenant names use A-Z a-z 0-9 . _ -'])
    const label = await configError(await writeTemp('label-id.yaml', `${MINIMAL_YAML}    clients:\n      labels:\n        fp:xyz: billing\n`))
    expect(label.problems).toEqual(['tenants.acme.clients.labels.fp:…: invalid key: expected a client id: fp:<16 hex digits>, hdr:<id>, hdr#<16 hex digits> or anonymous'])
  })

  it('merges a YAML `<<` key, so tenants can share settings by an anchor; a merge of a scalar is a problem without the value', async () => {
    const path = await writeTemp('merge.yaml', 'tenants:\n  acme: &base\n    upstream: { staging: http://127.0.0.1:4010 }\n    legacy: { responseFields: [{ from: /output/id, to: /runId }] }\n  beta:\n    <<: *base\n    upstream: { staging: http://127.0.0.1:4011 }\n')
    const config = await loadConfig(path, {})
    expect(config.tenants.beta?.upstream.staging).toBe('http://127.0.0.1:4011')
    expect(config.tenants.beta?.legacy.responseFields).toEqual(config.tenants.acme?.legacy.responseFields)
    const scalar = await configError(await writeTemp('merge-scalar.yaml', `${MINIMAL_YAML}    <<: key_supersecret42\n`))
    expect(scalar.problems).toEqual(['cannot parse the file: Merge sources must be maps or map aliases'])
  })

  it('reads a file nested 64 levels deep on to the schema', async () => {
    const error = await configError(await writeTemp('deep-enough.yaml', `tenants: ${'['.repeat(63)}${']'.repeat(63)}\n`))
    expect(error.problems).toEqual([expect.stringMatching(/^tenants: Invalid input: expected record/)])
  })

  it('rejects a YAML value with an unknown tag instead of reading it as a string', async () => {
    const error = await configError(await writeTemp('unknown-tag.yaml', `${MINIMAL_YAML}\nlog: { level: !loud info }\n`))
    expect(error.problems).toEqual(['cannot parse the file: Unresolved tag at line 7, column 15'])
  })

  it.each([['a string', 'hello\n'], ['a list', '- a\n'], ['a number', '42\n']])('reports a file whose root is %s as a problem of the root', async (_case, text) => {
    const error = await configError(await writeTemp('root.yaml', text))
    expect(error.problems).toEqual([expect.stringMatching(/^\(root\): Invalid input: expected object/)])
  })

  it('names a key glued to its value by a missing space (`{ token:s3cret }`) without the value', async () => {
    const text = `${MINIMAL_YAML}admin: { token:TOPSECRETzz }\nsessions: { redis: { url:redis://u:PWzz@h } }\n`
    const error = await configError(await writeTemp('glued.yaml', text))
    expect(error.problems).toEqual(['admin: Unrecognized key: "token:…"', 'sessions.redis: Unrecognized key: "url:…"'])
    expect(error.message).not.toMatch(/TOPSECRET|PWzz/)
  })

  it.each([
    ['a space before the colon', 'admin: { token :TOPSECRETzz }\n', 'admin: Unrecognized key: "token…"'],
    ['an equals sign', 'admin: { token=TOPSECRETzz }\n', 'admin: Unrecognized key: "token…"'],
    ['a space instead of the colon', 'sessions: { redis: { url redis://:PWzz@h } }\n', 'sessions.redis: Unrecognized key: "url…"'],
    ['a header and its value as one key', 'tracing: { headers: { x-api-key TOPSECRETzz } }\n', 'tracing.headers.x-api-key…: ']
  ])('names a key written with its value (%s) without the value', async (_case, line, shown) => {
    const error = await configError(await writeTemp('joined.yaml', `${MINIMAL_YAML}${line}`))
    expect(error.problems.some((problem) => problem.startsWith(shown))).toBe(true)
    expect(error.message).not.toMatch(/TOPSECRET|PWzz/)
  })

  it('names a glued key without its value where it is part of a problem\'s path', async () => {
    const error = await configError(await writeTemp('glued-path.yaml', `${MINIMAL_YAML}  token:TOPSECRETzz: {}\n`))
    expect(error.problems).toEqual([expect.stringMatching(/^tenants\.token:…: /)])
    expect(error.message).not.toMatch(/TOPSECRET/)
  })

  it('rejects a YAML mapping with a duplicate key with CONFIG_INVALID', async () => {
    const error = await configError(await writeTemp('duplicate.yaml', `${MINIMAL_YAML}\nlisten: { port: 1 }\nlisten: { port: 2 }\n`))
    expect(error.problems[0]).toMatch(/^cannot parse the file: /)
  })

  it('rejects a JSON object with a duplicate key, naming where, rather than keeping the last', async () => {
    const text = '{\n  "tenants": {"acme": {"upstream": {"staging": "http://127.0.0.1:4010"}}},\n  "admin": {"token": "key_supersecret42", "token": "other"}\n}\n'
    const error = await configError(await writeTemp('duplicate.json', text))
    expect(error.problems).toEqual(['cannot parse the file: Map keys must be unique at line 3, column 43'])
    expect(error.message).not.toMatch(/key_su|supersecret/)
  })

  it('accepts equal keys in different JSON objects', async () => {
    const config = await loadConfig(await writeTemp('same-keys.json', '{"listen": {"port": 1}, "admin": {"port": 2}, "tenants": {"acme": {"upstream": {"staging": "http://127.0.0.1:4010"}}}}'), {})
    expect([config.listen.port, config.admin.port]).toEqual([1, 2])
  })

  it('puts every problem into the CONFIG_INVALID error message, one per line', async () => {
    const error = await configError(await writeTemp('two-problems.yaml', `${MINIMAL_YAML}\nlisten: { port: -1 }\nlog: { level: loud }\n`))
    expect(error.problems).toHaveLength(2)
    for (const problem of error.problems) expect(error.message).toContain(`  - ${problem}`)
  })
})

describe('the loaded config is deeply frozen', () => {
  it('freezes the root and every nested object and array', async () => {
    const config = await loadConfig(await writeTemp('frozen.yaml', MINIMAL_YAML), {})
    expect(Object.isFrozen(config)).toBe(true)
    expect(Object.isFrozen(config.limits)).toBe(true)
    expect(Object.isFrozen(config.tenants)).toBe(true)
    expect(Object.isFrozen(config.tenants.acme?.upstream)).toBe(true)
    expect(Object.isFrozen(config.tenants.acme?.legacy.routes)).toBe(true)
    expect(Object.isFrozen(config.tenants.acme?.legacy.routes[0])).toBe(true)
    expect(Object.isFrozen(config.credentials.sources)).toBe(true)
  })

  it('throws on an assignment to a nested value instead of changing it', async () => {
    const config = await loadConfig(await writeTemp('frozen-assign.yaml', MINIMAL_YAML), {})
    const upstream = config.tenants.acme?.upstream as { staging: string }
    expect(() => {
      upstream.staging = 'http://evil.example'
    }).toThrow(TypeError)
    expect(config.tenants.acme?.upstream.staging).toBe('http://127.0.0.1:4010')
  })
})

describe('resolveConfigPath', () => {
  it('prefers --config over V4GW_CONFIG', () => {
    expect(resolveConfigPath('flag.yaml', { V4GW_CONFIG: 'env.yaml' })).toBe('flag.yaml')
  })

  it('uses V4GW_CONFIG when there is no --config', () => {
    expect(resolveConfigPath(undefined, { V4GW_CONFIG: 'env.yaml' })).toBe('env.yaml')
  })

  it('falls back to config/gateway.yaml when neither is given', () => {
    expect(resolveConfigPath(undefined, {})).toBe('config/gateway.yaml')
    expect(DEFAULT_CONFIG_PATH).toBe('config/gateway.yaml')
  })

  it('treats an empty V4GW_CONFIG as unset', () => {
    expect(resolveConfigPath(undefined, { V4GW_CONFIG: '' })).toBe('config/gateway.yaml')
  })
})

describe('the repository config/gateway.yaml', () => {
  const repoConfig = fileURLToPath(new URL('../../../config/gateway.yaml', import.meta.url))

  it('is valid with an empty environment', async () => {
    const config = await loadConfig(repoConfig, {})
    expect(Object.keys(config.tenants)).toEqual(['demo', 'staged'])
    expect(config.tenants.demo?.upstream).toEqual({ staging: 'embedded', production: null, target: 'staging' })
    // SPEC 14.1: the second demo tenant on the two built-in backends, in stages shadow and canary.
    expect(config.tenants.staged?.upstream).toEqual({ staging: 'embedded', production: null, target: 'staging', legacy: 'embedded' })
    expect(Object.values(config.tenants.staged?.migration.routes ?? {}).map((route) => route.stage)).toEqual(['shadow', 'canary', 'canary'])
    expect(config.tenancy.default).toBe('demo')
    expect(config.listen).toEqual({ host: '127.0.0.1', port: 8080 })
    expect(config.admin.token).toBeNull()
  })

  it('takes its ports and admin token from the environment', async () => {
    const config = await loadConfig(repoConfig, { V4GW_PORT: '18080', V4GW_ADMIN_PORT: '19901', V4GW_ADMIN_TOKEN: 'admin-secret' })
    expect(config.listen.port).toBe(18080)
    expect(config.admin.port).toBe(19901)
    expect(config.admin.token).toBe('admin-secret')
  })
})
