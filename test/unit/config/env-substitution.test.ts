import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../../src/config/load-config.js'
import type { GatewayConfig } from '../../../src/config/schema.js'
import { substituteEnv, type EnvProblem } from '../../../src/config/substitute-env.js'
import { configProblems, MINIMAL_YAML as TENANTS } from '../../helpers/config-files.js'
import { useTempDir } from '../../helpers/temp-dir.js'

const dir = useTempDir('v4gw-env-')
let fileCount = 0

/** Writes `yaml` to a fresh temp file; resolves with its path. */
function writeYaml(yaml: string): Promise<string> {
  return dir.write(`config-${++fileCount}.yaml`, yaml)
}

/** Writes `yaml` to a fresh temp file and loads it with `env`. */
async function load(yaml: string, env: Record<string, string | undefined>): Promise<GatewayConfig> {
  return loadConfig(await writeYaml(yaml), env)
}

async function problemsOf(yaml: string, env: Record<string, string | undefined>): Promise<string[]> {
  return configProblems(await writeYaml(yaml), env)
}

describe('${NAME} substitution', () => {
  it('replaces ${NAME} with the environment value', async () => {
    const config = await load(`tenants:\n  acme:\n    upstream:\n      staging: \${UPSTREAM}\n`, { UPSTREAM: 'http://10.0.0.5:4010' })
    expect(config.tenants.acme?.upstream.staging).toBe('http://10.0.0.5:4010')
  })

  it('replaces a placeholder inside a longer string and several in one string', async () => {
    const config = await load(`tenants:\n  acme:\n    upstream:\n      staging: http://\${UP_HOST}:\${UP_PORT:-4010}\n`, { UP_HOST: 'backend.internal' })
    expect(config.tenants.acme?.upstream.staging).toBe('http://backend.internal:4010')
  })

  it('uses the default of ${NAME:-default} when NAME is unset', async () => {
    const config = await load(`${TENANTS}log:\n  level: \${LOG_LEVEL:-warn}\n`, {})
    expect(config.log.level).toBe('warn')
  })

  it('uses the environment value of ${NAME:-default} when NAME is set', async () => {
    const config = await load(`${TENANTS}log:\n  level: \${LOG_LEVEL:-warn}\n`, { LOG_LEVEL: 'debug' })
    expect(config.log.level).toBe('debug')
  })

  it('uses the default of ${NAME:-default} when NAME is set to an empty string', async () => {
    const config = await load(`${TENANTS}log:\n  level: \${LOG_LEVEL:-error}\n`, { LOG_LEVEL: '' })
    expect(config.log.level).toBe('error')
  })

  it('turns an empty ${V4GW_ADMIN_TOKEN:-} into no admin token', async () => {
    const config = await load(`${TENANTS}admin:\n  token: \${V4GW_ADMIN_TOKEN:-}\n`, {})
    expect(config.admin.token).toBeNull()
  })

  it('reads the env object it is given, not process.env', async () => {
    process.env.V4GW_TEST_ONLY_IN_PROCESS_ENV = 'from-process-env'
    try {
      const config = await load(`${TENANTS}admin:\n  token: \${V4GW_TEST_ONLY_IN_PROCESS_ENV:-from-default}\n`, {})
      expect(config.admin.token).toBe('from-default')
    } finally {
      delete process.env.V4GW_TEST_ONLY_IN_PROCESS_ENV
    }
  })
})

// A free-form string key (admin.token takes no whitespace since 2026-11-23): the value stays one string.
describe('an environment value never changes the document structure', () => {
  it('keeps a value with a newline and a YAML key as one string', async () => {
    const config = await load(`${TENANTS}sessions:\n  redis:\n    keyPrefix: \${VALUE}\n`, { VALUE: 'abc\n  evil: 1' })
    expect(config.sessions.redis.keyPrefix).toBe('abc\n  evil: 1')
    expect(config.sessions.redis).not.toHaveProperty('evil')
  })

  it('keeps a value that looks like a YAML flow mapping as a string', async () => {
    const config = await load(`${TENANTS}sessions:\n  redis:\n    keyPrefix: \${VALUE}\n`, { VALUE: '{ evil: 1 }' })
    expect(config.sessions.redis.keyPrefix).toBe('{ evil: 1 }')
  })

  it('cannot add a tenant through a value that spells one in YAML', async () => {
    const config = await load(`${TENANTS}sessions:\n  redis:\n    keyPrefix: "\${VALUE}"\n`, { VALUE: 'x\ntenants:\n  evil:\n    upstream:\n      staging: http://evil.example' })
    expect(Object.keys(config.tenants)).toEqual(['acme'])
  })

  it('does not substitute placeholders that arrive inside an environment value', async () => {
    const config = await load(`${TENANTS}sessions:\n  redis:\n    keyPrefix: \${VALUE}\n`, { VALUE: 'a${SECOND}b', SECOND: 'expanded' })
    expect(config.sessions.redis.keyPrefix).toBe('a${SECOND}b')
  })

  it('keeps $& and $1 in an environment value literally', async () => {
    const config = await load(`${TENANTS}sessions:\n  redis:\n    keyPrefix: \${VALUE}\n`, { VALUE: 'p$&q$1r$$' })
    expect(config.sessions.redis.keyPrefix).toBe('p$&q$1r$$')
  })
})

describe('an unset ${NAME} without a default', () => {
  it('is a CONFIG_INVALID problem with the path of the value', async () => {
    const problems = await problemsOf(`${TENANTS}admin:\n  token: \${ADMIN_TOKEN}\n`, {})
    expect(problems).toHaveLength(1)
    expect(problems[0]).toMatch(/^admin\.token: environment variable ADMIN_TOKEN is not set/)
  })

  it('is reported with the array index in its path', async () => {
    const problems = await problemsOf(`${TENANTS}internalAdmin:\n  pathPrefixes: [/internal, "\${SECOND_PREFIX}"]\n`, {})
    expect(problems.some((problem) => /^internalAdmin\.pathPrefixes\.1: environment variable SECOND_PREFIX is not set/.test(problem))).toBe(true)
  })

  it('is reported once per placeholder, together with the other unset ones', async () => {
    const problems = await problemsOf(`${TENANTS}admin:\n  token: \${ADMIN_TOKEN}\nlog:\n  level: \${LOG_LEVEL}\n`, {})
    expect(problems.filter((problem) => problem.includes('environment variable'))).toEqual([
      expect.stringMatching(/^admin\.token: environment variable ADMIN_TOKEN is not set/),
      expect.stringMatching(/^log\.level: environment variable LOG_LEVEL is not set/)
    ])
  })

  it('is a problem when the variable is set to an empty string', async () => {
    const problems = await problemsOf(`${TENANTS}admin:\n  token: \${ADMIN_TOKEN}\n`, { ADMIN_TOKEN: '' })
    expect(problems[0]).toMatch(/^admin\.token: environment variable ADMIN_TOKEN is not set/)
  })
})

describe('numeric values from the environment', () => {
  it('turns ${PORT:-8080} into the number 8080', async () => {
    const config = await load(`${TENANTS}listen:\n  port: \${PORT:-8080}\n`, {})
    expect(config.listen.port).toBe(8080)
  })

  it('turns a PORT from the environment into a number', async () => {
    const config = await load(`${TENANTS}listen:\n  port: \${PORT:-8080}\n`, { PORT: '9090' })
    expect(config.listen.port).toBe(9090)
  })

  it('turns numeric limits, admin port and grace period from the environment into numbers', async () => {
    const config = await load(
      `${TENANTS}admin:\n  port: \${ADMIN_PORT}\nlimits:\n  bodyBytes: \${BODY_BYTES}\n  upstreamTimeoutMs: \${TIMEOUT:-200}\nshutdown:\n  graceMs: \${GRACE:-0}\nsessions:\n  maxEntries: \${MAX_ENTRIES}\n`,
      { ADMIN_PORT: '9902', BODY_BYTES: '2048', MAX_ENTRIES: '5' }
    )
    expect(config.admin.port).toBe(9902)
    expect(config.limits.bodyBytes).toBe(2048)
    expect(config.limits.upstreamTimeoutMs).toBe(200)
    expect(config.shutdown.graceMs).toBe(0)
    expect(config.sessions.maxEntries).toBe(5)
  })

  it('reports a port from the environment that is not a whole number as a listen.port problem', async () => {
    const problems = await problemsOf(`${TENANTS}listen:\n  port: \${PORT}\n`, { PORT: '80a' })
    expect(problems).toHaveLength(1)
    expect(problems[0]).toMatch(/^listen\.port: /)
  })

  it('refuses a placeholder nested in a default and one never closed, naming no value; a $ before anything else stays text', async () => {
    const env = { V4GW_ADMIN_TOKEN: 's3cret-value' }
    expect(await problemsOf(`${TENANTS}admin:\n  token: "\${V4GW_ADMIN_TOKEN:-\${FALLBACK}}"\n`, env)).toEqual([
      'admin.token: placeholder ${V4GW_ADMIN_TOKEN:-…} has a placeholder in its default; nested placeholders are not supported (SPEC 8: ${NAME} and ${NAME:-default})'
    ])
    expect(await problemsOf(`${TENANTS}admin:\n  token: "\${V4GW_ADMIN_TOKEN"\n`, env)).toEqual([
      'admin.token: ${V4GW_ADMIN_TOKEN starts a placeholder that is not closed; write ${V4GW_ADMIN_TOKEN} or ${V4GW_ADMIN_TOKEN:-default}'
    ])
    expect(await problemsOf(`${TENANTS}admin:\n  token: "a\${A}b\${B:-x"\n`, { A: 'one' })).toEqual([
      'admin.token: ${B starts a placeholder that is not closed; write ${B} or ${B:-default}'
    ])
    expect(await problemsOf(`${TENANTS}admin:\n  token: "\${V4GW_ADMIN_TOKEN:-{dev}}"\n`, env)).toEqual([
      'admin.token: the default of placeholder ${V4GW_ADMIN_TOKEN:-…} holds a {: a default ends at the first }, so it can hold neither'
    ])
    const config = await load(`${TENANTS}admin:\n  token: "p$ss\${}$V4GW_ADMIN_TOKEN\${1}"\n`, env)
    expect(config.admin.token).toBe('p$ss${}$V4GW_ADMIN_TOKEN${1}')
    // A `$` in a default before anything but a name is text too.
    const priced = await load(`${TENANTS}admin:\n  token: "\${UNSET_TOKEN:-pa$9}"\n`, env)
    expect(priced.admin.token).toBe('pa$9')
  })

  it('reports a port from the environment above 65535 as a listen.port problem', async () => {
    const problems = await problemsOf(`${TENANTS}listen:\n  port: \${PORT}\n`, { PORT: '70000' })
    expect(problems[0]).toMatch(/^listen\.port: /)
  })
})

describe('substituteEnv', () => {
  it('leaves keys, numbers, booleans and null untouched', () => {
    const problems: EnvProblem[] = []
    const result = substituteEnv({ '${KEY}': 1, flag: true, none: null, list: ['${A}'] }, { KEY: 'k', A: 'a' }, problems)
    expect(result).toEqual({ '${KEY}': 1, flag: true, none: null, list: ['a'] })
    expect(problems).toEqual([])
  })

  it('records the path of every unset placeholder', () => {
    const problems: EnvProblem[] = []
    substituteEnv({ tenants: { acme: { upstream: { staging: '${UP}' } } }, list: ['x', '${B}'] }, {}, problems)
    expect(problems.map((problem) => problem.path)).toEqual([['tenants', 'acme', 'upstream', 'staging'], ['list', 1]])
  })
})
