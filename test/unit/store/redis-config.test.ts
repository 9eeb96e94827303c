import { describe, expect, it } from 'vitest'
import { parseConfigText, type ConfigError } from '../../../src/config/load-config.js'
import type { GatewayConfig } from '../../../src/config/schema.js'
import { MAX_START_LOCK_MS, startLockMs } from '../../../src/sessions/create-session-store.js'
import { redisOptionsFromUrl } from '../../../src/store/redis-connection.js'

const TENANT = 'tenants:\n  acme:\n    upstream: { staging: "http://127.0.0.1:4010" }\n'

function parse(sessionsYaml: string, env: Record<string, string | undefined> = {}): GatewayConfig {
  return parseConfigText(`${sessionsYaml}\n${TENANT}`, 'gateway.yaml', env)
}

function problemsOf(sessionsYaml: string, env: Record<string, string | undefined> = {}): string[] {
  try {
    parse(sessionsYaml, env)
  } catch (error) {
    expect((error as ConfigError).code).toBe('CONFIG_INVALID')
    return (error as ConfigError).problems
  }
  throw new Error('expected the config to be rejected')
}

describe('sessions.store and sessions.redis (SPEC 8)', () => {
  it('defaults to the in-memory store with no Redis URL and the v4gw: prefix', () => {
    const { sessions } = parse('')
    expect(sessions.store).toBe('memory')
    expect(sessions.redis).toEqual({ url: null, keyPrefix: 'v4gw:' })
  })

  it('accepts redis with a redis:// URL and a key prefix', () => {
    const { sessions } = parse('sessions:\n  store: redis\n  redis:\n    url: redis://:secret@valkey:6379/2\n    keyPrefix: "fleet-a:"')
    expect(sessions).toMatchObject({ store: 'redis', redis: { url: 'redis://:secret@valkey:6379/2', keyPrefix: 'fleet-a:' } })
  })

  it('accepts a rediss:// (TLS) URL', () => {
    expect(parse('sessions:\n  store: redis\n  redis: { url: "rediss://valkey.internal:6380" }').sessions.redis.url).toBe('rediss://valkey.internal:6380')
  })

  it('substitutes ${ENV} in the Redis URL', () => {
    const { sessions } = parse('sessions:\n  store: redis\n  redis:\n    url: ${V4GW_REDIS_URL}', { V4GW_REDIS_URL: 'redis://cache:6379' })
    expect(sessions.redis.url).toBe('redis://cache:6379')
  })

  it('reads an empty URL (the usual ${V4GW_REDIS_URL:-}) as none', () => {
    expect(parse('sessions:\n  redis:\n    url: ${V4GW_REDIS_URL:-}').sessions.redis.url).toBeNull()
  })

  it('reports sessions.redis.url when the store is redis and no URL is set', () => {
    expect(problemsOf('sessions:\n  store: redis')).toEqual(['sessions.redis.url: sessions.store is redis but no sessions.redis.url is set'])
  })

  it('reports sessions.redis.url when an empty ${ENV} leaves the redis store without a URL', () => {
    expect(problemsOf('sessions:\n  store: redis\n  redis:\n    url: ${V4GW_REDIS_URL:-}')).toEqual(['sessions.redis.url: sessions.store is redis but no sessions.redis.url is set'])
  })

  it.each(['http://valkey:6379', 'valkey:6379', 'redis//valkey'])('rejects %s as a Redis URL with its path', (url) => {
    expect(problemsOf(`sessions:\n  store: redis\n  redis: { url: "${url}" }`)).toEqual(['sessions.redis.url: Invalid URL: expected a redis:// or rediss:// URL'])
  })

  // Never quoted back: the URL may hold the password.
  it('rejects a Redis URL whose password is not valid percent-encoding, without quoting it', () => {
    const problems = problemsOf('sessions:\n  store: redis\n  redis: { url: "redis://:a%zzs3cret-pw@valkey:6379" }')
    expect(problems).toEqual([expect.stringMatching(/^sessions\.redis\.url: the user or password in the Redis URL is not valid percent-encoding/)])
    expect(problems.join('\n')).not.toContain('s3cret-pw')
  })

  it.each(['redis://valkey:6379?family=6', 'redis://valkey:6379/cache', 'redis://valkey:6379/0#x'])('rejects %s: a Redis URL has a database number as its only path, and no query or fragment', (url) => {
    expect(problemsOf(`sessions:\n  store: redis\n  redis: { url: "${url}" }`)).toEqual([expect.stringMatching(/^sessions\.redis\.url: a Redis URL is redis\[s\]:\/\/\[user:password@\]host/)])
  })

  it('rejects a store that is neither memory nor redis', () => {
    expect(problemsOf('sessions:\n  store: memcached')[0]).toMatch(/^sessions\.store: /)
  })

  it('rejects an unknown key under sessions.redis', () => {
    expect(problemsOf('sessions:\n  redis: { host: valkey }')[0]).toMatch(/^sessions\.redis: /)
  })

  it('rejects an empty key prefix', () => {
    expect(problemsOf('sessions:\n  redis: { keyPrefix: "" }')[0]).toMatch(/^sessions\.redis\.keyPrefix: /)
  })
})

describe('startLockMs (the shared store keeps serving, SPEC 12)', () => {
  it('lives as long as an upstream call may take', () => {
    expect(startLockMs(3_000)).toBe(3_000)
  })

  it('is capped, so a crashed owner holds up a key for at most 10 s', () => {
    expect(startLockMs(30_000)).toBe(MAX_START_LOCK_MS)
    expect(MAX_START_LOCK_MS).toBe(10_000)
  })
})

describe('redisOptionsFromUrl: the URL as the config validated it, not as url.parse reads it', () => {
  it.each([
    ['a backslash in the password', 'redis://:Zq\\9x@127.0.0.1:46380', { host: '127.0.0.1', port: 46380, password: 'Zq\\9x' }],
    ['a percent-encoded user and password, a database', 'redis://app%40fleet:p%40ss@cache:7000/2', { host: 'cache', port: 7000, username: 'app@fleet', password: 'p@ss', db: 2 }],
    ['TLS on an IPv6 literal, the default port', 'rediss://[::1]', { host: '::1', port: 6379, tls: {} }]
  ])('%s', (_case, url, options) => {
    expect(redisOptionsFromUrl(url)).toEqual(options)
  })
})
