import { readFileSync } from 'node:fs'
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import { parse, parseAllDocuments } from 'yaml'
import { describe, expect, it } from 'vitest'
import { ConfigError, parseConfigText } from '../../../src/config/load-config.js'
import { composeFile } from '../../helpers/container-files.js'

/*
 * config.schema.json as editors and CI use it: the committed file (config-reference.test.ts keeps
 * it equal to the generated one), compiled by Ajv in strict mode, judged against check-config,
 * which is loadConfig and so parseConfigText.
 */

const root = new URL('../../../', import.meta.url)
const schema = JSON.parse(readFileSync(new URL('config.schema.json', root), 'utf8')) as Record<string, unknown>

function compileStrict(): ValidateFunction {
  return new Ajv2020({ strict: true, allErrors: true }).compile(schema)
}

/** Every config file the repository ships, as the gateway would read it. */
function shippedConfigs(): [string, string][] {
  // Compose reads `$$` as a literal `$`: the gateway sees its own placeholder.
  const compose = (composeFile().configs.gateway?.content ?? '').replaceAll('$$', '$')
  const configMaps = parseAllDocuments(readFileSync(new URL('deploy/kubernetes/configmap.yaml', root), 'utf8'))
    .map((document) => document.toJS() as { kind?: string; metadata?: { name?: string }; data?: Record<string, string> })
    .filter((manifest) => manifest.kind === 'ConfigMap')
    .flatMap((manifest) => Object.entries(manifest.data ?? {}).map(([key, text]): [string, string] => [`ConfigMap ${manifest.metadata?.name ?? ''} key ${key}`, text]))
  expect(compose).not.toBe('')
  expect(configMaps.length).toBeGreaterThan(0)
  return [['config/gateway.yaml', readFileSync(new URL('config/gateway.yaml', root), 'utf8')], ['docker-compose.yml config gateway', compose], ...configMaps]
}

function schemaAccepts(yaml: string): boolean {
  return compileStrict()(parse(yaml)) === true
}

/** check-config's verdict, with an environment that sets nothing: every placeholder takes its default. */
function gatewayAccepts(yaml: string): boolean {
  try {
    parseConfigText(yaml, 'corpus.yaml', {})
    return true
  } catch (error) {
    if (error instanceof ConfigError) return false
    throw error
  }
}

/** The bold names of the list in docs/config.md's section on what the schema checks. */
function checksBeyondSchema(): string[] {
  const doc = readFileSync(new URL('docs/config.md', root), 'utf8')
  const section = doc.split(/^## /m).find((part) => part.startsWith('What the schema checks')) ?? ''
  return [...section.matchAll(/^- \*\*([^*]+)\*\*/gm)].map((match) => match[1] as string)
}

/** Every key under `properties` whose default is a string, number or boolean, with that default. */
function scalarDefaults(node: Record<string, unknown>, path: string[] = []): { path: string[]; value: unknown }[] {
  const properties = (node.properties ?? {}) as Record<string, Record<string, unknown>>
  return Object.entries(properties).flatMap(([key, child]) =>
    ['string', 'number', 'boolean'].includes(typeof child.default) ? [{ path: [...path, key], value: child.default }] : scalarDefaults(child, [...path, key])
  )
}

/** `value` at `path`, as block-style YAML. */
function nested(path: string[], value: string): string {
  return path.map((key, depth) => `${'  '.repeat(depth)}${key}:${depth === path.length - 1 ? ` ${value}` : ''}`).join('\n')
}

const TENANT = 'tenants:\n  acme:\n    upstream:\n      staging: http://127.0.0.1:4010\n'

function withTenant(yaml: string): string {
  return `${yaml}\n${TENANT}`
}

function withRoute(route: string): string {
  return `tenants:\n  acme:\n    upstream: { staging: http://127.0.0.1:4010 }\n    legacy:\n      routes:\n        - ${route}\n`
}

/** A tenant with `legacy.deprecation` (SPEC 13) and, under the tenant, `rest` (YAML at four spaces). */
function withDeprecation(deprecation: string, rest = ''): string {
  return `tenants:\n  acme:\n    upstream: { staging: http://127.0.0.1:4010 }\n    legacy:\n      deprecation: ${deprecation}\n${rest}`
}

interface Case {
  name: string
  yaml: string
  valid: boolean
  /** For a file check-config refuses and the schema cannot: the check, as docs/config.md names it. */
  beyondSchema?: string
}

const VALID: Case[] = [
  { name: 'the least a config needs', yaml: TENANT, valid: true },
  { name: 'the shipped config/gateway.yaml', yaml: readFileSync(new URL('config/gateway.yaml', root), 'utf8'), valid: true },
  {
    name: 'a placeholder for every kind of scalar, in block style',
    yaml: withTenant(
      [
        'listen:',
        '  host: ${V4GW_HOST:-0.0.0.0}',
        '  port: ${V4GW_PORT:-8080}',
        'admin:',
        '  port: ${V4GW_ADMIN_PORT:-9901}',
        '  token: ${V4GW_ADMIN_TOKEN:-}',
        'log:',
        '  level: ${V4GW_LOG_LEVEL:-info}',
        'tracing:',
        '  forwardBaggage: ${V4GW_BAGGAGE:-false}',
        'limits:',
        '  bodyBytes: ${V4GW_BODY_BYTES:-1048576}',
        '  upstreamTimeoutMs: ${V4GW_UPSTREAM_TIMEOUT_MS:-30000}',
        'shutdown:',
        '  graceMs: ${V4GW_GRACE_MS:-0}',
        'sessions:',
        '  store: ${V4GW_SESSION_STORE:-memory}',
        '  staleStatuses: [404, "${V4GW_STALE:-410}"]',
        '  redis:',
        '    url: ${V4GW_REDIS_URL:-}'
      ].join('\n')
    ),
    valid: true
  },
  { name: 'quoted placeholders in a flow mapping', yaml: withTenant('listen: { host: "${HOST:-127.0.0.1}", port: "${PORT:-8080}" }'), valid: true },
  { name: 'an upstream built of placeholders', yaml: 'tenants:\n  acme:\n    upstream:\n      staging: http://${UP_HOST:-127.0.0.1}:${UP_PORT:-4010}\n', valid: true },
  { name: 'a whole upstream as a placeholder', yaml: 'tenants:\n  acme:\n    upstream:\n      staging: ${UPSTREAM:-embedded}\n      target: ${TARGET:-staging}\n', valid: true },
  { name: 'a placeholder in a list of path prefixes', yaml: withTenant('internalAdmin:\n  pathPrefixes: ["${INTERNAL_PREFIX:-/internal}"]'), valid: true },
  { name: 'a quoted whole number', yaml: withTenant('listen:\n  port: "08080"'), valid: true },
  { name: 'a boolean written as text', yaml: withTenant('tracing:\n  forwardBaggage: "true"'), valid: true },
  { name: 'target production with a production upstream', yaml: 'tenants:\n  acme:\n    upstream: { staging: embedded, production: "https://v4.example.com", target: production }\n', valid: true },
  { name: 'a Redis session store with its URL', yaml: withTenant('sessions:\n  store: redis\n  redis: { url: "rediss://gw:p%40ss@redis.internal:6380/2" }'), valid: true },
  {
    name: 'a route table of every action, methods in any case',
    yaml: `tenants:\n  acme:\n    upstream: { staging: http://127.0.0.1:4010 }\n    legacy:\n      routes:\n        - { method: post, path: /v1/run, action: execute }\n        - { method: POST, path: "/v1/runs/:runId/invoke", action: session-execute, stateKey: "param:runId" }\n        - { method: Get, path: "/v1/policies/:id", action: proxy, rewrite: "/v4/policies/:id" }\n`,
    valid: true
  },
  { name: 'deprecation headers with a public link', yaml: `${TENANT}    legacy:\n      deprecation: { date: "2026-07-01T00:00:00Z", sunset: "2027-07-01T00:00:00+02:00", link: "https://example.com/v4?from=v1#migrate" }\n`, valid: true },
  { name: 'tenancy by host, with a bracketed IPv6 address', yaml: withTenant('tenancy:\n  default: acme\n  hosts: { api.example.com: acme, "[fd00::1]": acme, API.Other.Example: acme }'), valid: true },
  {
    name: 'a deprecation with brownout windows, a ladder, a percentage, an exemption and a route of its own',
    yaml: withDeprecation(
      '{ date: "2030-01-01T00:00:00Z", sunset: "2031-01-01T00:00:00Z", afterSunset: gone, sunsetLink: "https://docs.example.com/sunset", brownouts: { windows: [{ start: "2030-03-01T14:00:00Z", end: "2030-03-01T15:00:00Z" }], escalation: { first: "2030-04-01T14:00:00Z", everyMs: 604800000, durationsMs: [3600000, "14400000"] }, clients: 12.5 }, exempt: [{ client: "fp:0123456789abcdef", until: "2030-06-01T00:00:00Z", reason: "contract" }] }',
      '    migration:\n      routes:\n        "POST /v1/headless/runs": { deprecation: { successor: "false" } }\n        "POST /v1/runs/invoke": { deprecation: null }\n        "POST /v1/runs/:runId/invoke": { deprecation: { sunset: null, sunsetLink: null, afterSunset: null, successor: null, exempt: null } }\n'
    ),
    valid: true
  },
  { name: 'the shared store in its own section', yaml: withTenant('store:\n  kind: redis\n  redis: { url: "redis://127.0.0.1:6379", keyPrefix: "gw1:" }\n  flushMs: "${V4GW_FLUSH_MS:-2000}"'), valid: true },
  { name: 'both spellings of the store, saying the same', yaml: withTenant('store: { kind: redis, redis: { url: "redis://127.0.0.1:6379" } }\nsessions: { store: redis, redis: { url: "redis://127.0.0.1:6379" } }'), valid: true },
  {
    name: 'client ids from a header, then the credential, with labels and a header exemption',
    yaml: withDeprecation(
      '{ date: "2030-01-01T00:00:00Z", exempt: [{ client: "hdr:billing-batch", until: "2030-06-01T00:00:00Z" }, { client: "fp:0123456789abcdef", until: "2030-06-01T00:00:00Z" }] }',
      '    clients:\n      key: [header:X-Client-Id, credential]\n      labels: { "hdr:billing-batch": { name: Billing, owner: "team-billing@example.com" }, "fp:0123456789abcdef": nightly, anonymous: { name: unknown } }\n'
    ),
    valid: true
  }
]

VALID.push({
  name: 'percentages as placeholders',
  yaml: 'tenants:\n  acme:\n    upstream: { staging: http://127.0.0.1:4010, legacy: http://127.0.0.1:4011 }\n    migration:\n      canary: { percent: "${CANARY_PCT:-12.5}" }\n      shadow: { percent: "50" }\n',
  valid: true
})

const INVALID: Case[] = [
  { name: 'a tenant header that carries a credential', yaml: withTenant('tenancy: { header: X-Api-Key }'), valid: false },
  { name: 'an unknown top-level key', yaml: withTenant('listn: { port: 8080 }'), valid: false },
  { name: 'an unknown nested key', yaml: withTenant('limits: { upstreamTimeout: 30000 }'), valid: false },
  { name: 'an upstream of another scheme', yaml: 'tenants:\n  acme:\n    upstream: { staging: "ftp://files.example:21" }\n', valid: false },
  { name: 'an upstream with a path', yaml: 'tenants:\n  acme:\n    upstream: { staging: "http://127.0.0.1:4010/api" }\n', valid: false },
  { name: 'an upstream with credentials', yaml: 'tenants:\n  acme:\n    upstream: { staging: "http://user:pw@127.0.0.1:4010" }\n', valid: false },
  { name: 'an internal admin URL without a scheme', yaml: withTenant('internalAdmin: { urls: ["admin.internal:9000"] }'), valid: false },
  { name: 'a Redis URL of another scheme', yaml: withTenant('sessions: { store: redis, redis: { url: "http://redis.internal:6379" } }'), valid: false },
  { name: 'a Redis store without its URL', yaml: withTenant('sessions: { store: redis }'), valid: false },
  { name: 'target production without a production upstream', yaml: 'tenants:\n  acme:\n    upstream: { staging: http://127.0.0.1:4010, target: production }\n', valid: false },
  { name: 'port 70000', yaml: withTenant('listen: { port: 70000 }'), valid: false },
  { name: 'port "70000" as text', yaml: withTenant('admin: { port: "70000" }'), valid: false },
  { name: 'a log level pino does not have', yaml: withTenant('log: { level: loud }'), valid: false },
  { name: 'a negative grace period', yaml: withTenant('shutdown: { graceMs: -1 }'), valid: false },
  { name: 'a negative upstream timeout', yaml: withTenant('limits: { upstreamTimeoutMs: -5 }'), valid: false },
  { name: 'a negative duration as text', yaml: withTenant('shutdown: { idleCloseMs: "-5" }'), valid: false },
  { name: 'a zero upstream timeout', yaml: withTenant('limits: { upstreamTimeoutMs: 0 }'), valid: false },
  { name: 'a timer longer than Node keeps', yaml: withTenant('limits: { connectTimeoutMs: 2147483648 }'), valid: false },
  { name: 'a stale status that is not an error', yaml: withTenant('sessions: { staleStatuses: [200] }'), valid: false },
  { name: 'no tenant', yaml: 'tenants: {}\n', valid: false },
  { name: 'a tenant name with a space', yaml: 'tenants:\n  acme corp:\n    upstream: { staging: embedded }\n', valid: false },
  { name: 'an admin token with a space', yaml: withTenant('admin: { token: "two words" }'), valid: false },
  { name: 'a boolean as yes', yaml: withTenant('tracing: { forwardBaggage: "yes" }'), valid: false },
  { name: 'a method HTTP does not have', yaml: withRoute('{ method: FETCH, path: /v1/run, action: execute }'), valid: false },
  { name: 'a proxy route without rewrite', yaml: withRoute('{ method: GET, path: /v1/policies, action: proxy }'), valid: false },
  { name: 'rewrite on an execute route', yaml: withRoute('{ method: POST, path: /v1/run, action: execute, rewrite: /v4/execute }'), valid: false },
  { name: 'a state key on an execute route', yaml: withRoute('{ method: POST, path: /v1/run, action: execute, stateKey: "body:/id" }'), valid: false },
  { name: 'a deprecation date that is not ISO 8601', yaml: `${TENANT}    legacy:\n      deprecation: { date: "1 July 2026" }\n`, valid: false },
  { name: 'a Host key with its port', yaml: withTenant('tenancy: { hosts: { "api.example.com:8443": acme } }'), valid: false },
  { name: 'a bare IPv6 Host key', yaml: withTenant('tenancy: { hosts: { "fd00::1": acme } }'), valid: false },
  { name: 'a Host key holding a placeholder, which keys never substitute', yaml: withTenant('tenancy: { hosts: { "${PUBLIC_HOST}": acme } }'), valid: false },
  { name: 'an allowed admin host with a space', yaml: withTenant('admin: { allowedHosts: ["gw example.com"] }'), valid: false },
  { name: 'a Host key with a bare %', yaml: withTenant('tenancy: { hosts: { "a%zz.example": acme } }'), valid: false },
  { name: 'an IPvFuture Host key, its v in either case', yaml: withTenant('tenancy: { default: acme, hosts: { "[V1.abc]": acme, "[v2.x]": acme } }'), valid: true },
  { name: 'a bracketed Host key never closed', yaml: withTenant('tenancy: { hosts: { "[abc": acme } }'), valid: false },
  { name: 'a bracketed Host key with a zone not written %25', yaml: withTenant('tenancy: { hosts: { "[fe80::7%eth0]": acme } }'), valid: false },
  { name: 'a bracketed Host key in another spelling of its address', yaml: withTenant('tenancy: { hosts: { "[0:0::1]": acme } }'), valid: false, beyondSchema: "an IPv6 key's spelling" },
  { name: 'a Host key with a percent-encoded octet', yaml: withTenant('tenancy: { default: acme, hosts: { "a%2dz.example": acme } }'), valid: true },
  { name: 'an unknown default tenant', yaml: withTenant('tenancy: { default: ghost }'), valid: false, beyondSchema: 'tenant names used elsewhere' },
  { name: 'a Host naming an unknown tenant', yaml: withTenant('tenancy: { hosts: { api.example.com: ghost } }'), valid: false, beyondSchema: 'tenant names used elsewhere' },
  { name: 'a rewrite naming a parameter its path lacks', yaml: withRoute('{ method: GET, path: /v1/policies, action: proxy, rewrite: "/v4/policies/:id" }'), valid: false, beyondSchema: 'route parameters' },
  { name: 'an upstream that is the internal admin surface', yaml: 'internalAdmin: { urls: ["http://127.0.0.1:4010/admin"] }\ntenants:\n  acme:\n    upstream: { staging: http://127.0.0.1:4010 }\n', valid: false, beyondSchema: 'internal origins' },
  { name: 'a Host listed twice in two cases', yaml: withTenant('tenancy: { hosts: { api.example.com: acme, API.example.com: acme } }'), valid: false, beyondSchema: 'hosts listed twice' },
  { name: 'a placeholder whose default is not a log level', yaml: withTenant('log: { level: "${V4GW_LOG_LEVEL:-loud}" }'), valid: false, beyondSchema: 'what a placeholder becomes' },
  { name: 'a deprecation whose sunset comes before its date', yaml: withDeprecation('{ date: "2030-01-01T00:00:00Z", sunset: "2029-01-01T00:00:00Z" }'), valid: false, beyondSchema: 'deprecation dates and windows' },
  { name: 'a brownout window with too short a notice', yaml: withDeprecation('{ date: "2030-01-01T00:00:00Z", brownouts: { windows: [{ start: "2030-01-02T00:00:00Z", end: "2030-01-02T01:00:00Z" }] } }'), valid: false, beyondSchema: 'deprecation dates and windows' },
  { name: 'a migration.routes key that is not a route', yaml: withDeprecation('null', '    migration:\n      routes:\n        "GET /v1/nope": { deprecation: null }\n'), valid: false, beyondSchema: 'route keys' },
  { name: 'a brownout percentage with three decimals', yaml: withDeprecation('{ date: "2030-01-01T00:00:00Z", brownouts: { clients: 12.345, minNoticeMs: 0 } }'), valid: false, beyondSchema: 'deprecation dates and windows' },
  { name: 'a client-id source that is a credential header', yaml: `${TENANT}    clients: { key: [header:x-api-key, credential] }\n`, valid: false },
  { name: 'a client-id source that is the cookie, in capitals', yaml: `${TENANT}    clients: { key: [header:Cookie] }\n`, valid: false },
  { name: 'a client-id source of another kind', yaml: `${TENANT}    clients: { key: [query:client] }\n`, valid: false },
  { name: 'no client-id source', yaml: `${TENANT}    clients: { key: [] }\n`, valid: false },
  { name: 'an owner without a name', yaml: `${TENANT}    clients: { labels: { anonymous: { owner: ops } } }\n`, valid: false },
  { name: 'a Redis store kind without its URL', yaml: withTenant('store: { kind: redis }'), valid: false },
  { name: 'a client-id source named as the query credential', yaml: `credentials: { queryParam: token }\n${TENANT}    clients: { key: [header:token, credential] }\n`, valid: false, beyondSchema: 'client ids and their sources' },
  { name: 'a label of an id no source produces', yaml: `${TENANT}    clients: { labels: { "hdr:billing": billing } }\n`, valid: false, beyondSchema: 'client ids and their sources' },
  { name: 'an fp: exemption without the credential source', yaml: withDeprecation('{ date: "2030-01-01T00:00:00Z", exempt: [{ client: "fp:0123456789abcdef", until: "2030-06-01T00:00:00Z" }] }', '    clients: { key: [header:x-client-id] }\n'), valid: false, beyondSchema: 'client ids and their sources' },
  { name: 'the two spellings of the store saying different things', yaml: withTenant('store: { kind: memory }\nsessions: { store: redis, redis: { url: "redis://127.0.0.1:6379" } }'), valid: false, beyondSchema: 'the two spellings of the store' },
  { name: 'two different Redis URLs under the two spellings', yaml: withTenant('store: { redis: { url: "redis://a.internal:6379" } }\nsessions: { redis: { url: "redis://b.internal:6379" } }'), valid: false, beyondSchema: 'the two spellings of the store' },
  { name: 'a client id that is not one', yaml: withDeprecation('{ date: "2030-01-01T00:00:00Z", exempt: [{ client: "fp:XYZ", until: "2030-06-01T00:00:00Z" }] }'), valid: false },
  { name: 'idempotency with its defaults, one route off and one with a header of its own', yaml: `${TENANT}    legacy:\n      idempotency: {}\n    migration:\n      routes:\n        "POST /v1/headless/runs": { idempotency: null }\n        "POST /v1/runs/invoke": { idempotency: { keyHeader: X-Retry-Key, waitMs: "0", forwardHeader: idempotency-key } }\n`, valid: true },
  { name: 'idempotency forwarding the key in the authorization header', yaml: `${TENANT}    legacy:\n      idempotency: { forwardHeader: Authorization }\n`, valid: false },
  { name: 'idempotency with a ttl of zero', yaml: `${TENANT}    legacy:\n      idempotency: { ttlMs: 0 }\n`, valid: false },
  { name: 'idempotency with a key that is not one', yaml: `${TENANT}    legacy:\n      idempotency: { replay: true }\n`, valid: false },
  { name: 'idempotency on a proxy route', yaml: `${TENANT}    legacy:\n      routes: [{ method: GET, path: /v1/policies, action: proxy, rewrite: /v4/policies }]\n    migration:\n      routes:\n        "GET /v1/policies": { idempotency: {} }\n`, valid: false, beyondSchema: 'idempotency on a proxy route' }
]

describe('config.schema.json', () => {
  it('compiles under Ajv in strict mode (draft 2020-12)', () => {
    expect(schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema')
    expect(compileStrict).not.toThrow()
  })

  // SPEC 18: every shipped config validates against it: the image's, the compose file's, the Kubernetes ConfigMap's.
  it.each(shippedConfigs())('accepts the shipped %s, placeholders and all', (_name, text) => {
    const validate = compileStrict()
    const valid = validate(parse(text))
    expect(validate.errors ?? []).toEqual([])
    expect(valid).toBe(true)
  })

  it('accepts a placeholder wherever the gateway substitutes one: each scalar key, with its default as the placeholder\'s', () => {
    const keys = scalarDefaults(schema)
    expect(keys.length).toBeGreaterThan(20)
    for (const { path, value } of keys) {
      const yaml = withTenant(nested(path, `"\${V4GW_UNSET_IN_THIS_TEST:-${String(value)}}"`))
      expect({ path: path.join('.'), schema: schemaAccepts(yaml), checkConfig: gatewayAccepts(yaml) }).toEqual({ path: path.join('.'), schema: true, checkConfig: true })
    }
  })

  it('holds a corpus of at least 25 files, valid and invalid', () => {
    expect(VALID.length + INVALID.length).toBeGreaterThanOrEqual(25)
    expect(VALID.length).toBeGreaterThan(10)
    expect(INVALID.length).toBeGreaterThan(10)
  })

  it.each([...VALID, ...INVALID].filter((entry) => entry.beyondSchema === undefined).map((entry) => [entry.name, entry] as const))(
    'judges %s as check-config does',
    (_name, entry) => {
      expect({ schema: schemaAccepts(entry.yaml), checkConfig: gatewayAccepts(entry.yaml) }).toEqual({ schema: entry.valid, checkConfig: entry.valid })
    }
  )

  it.each(INVALID.filter((entry) => entry.beyondSchema !== undefined).map((entry) => [entry.name, entry] as const))(
    'leaves %s to check-config, as docs/config.md says',
    (_name, entry) => {
      expect({ schema: schemaAccepts(entry.yaml), checkConfig: gatewayAccepts(entry.yaml) }).toEqual({ schema: true, checkConfig: false })
      expect(checksBeyondSchema()).toContain(entry.beyondSchema)
    }
  )
})
