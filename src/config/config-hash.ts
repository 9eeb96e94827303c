import { createHash } from 'node:crypto'
import { canonicalJson } from '../util/canonical-json.js'
import type { GatewayConfig } from './schema.js'

/** Stands in for a secret's value in what is hashed. */
const SECRET_SET = '(secret set)'

const hashes = new WeakMap<GatewayConfig, string>()

/**
 * The running config's hash (SPEC 17: `v4gw_config_info{hash}` and `/readyz`): the first 12 hex
 * digits of the SHA-256 of the effective config (defaults filled in, placeholders substituted) as
 * canonical JSON, object keys sorted. Replicas running the same config show the same hash.
 *
 * A secret is hashed as "set" or not, never by its value: the hash is published to anyone who
 * can scrape `/metrics`, and a hash over the value would let such a reader confirm guesses of a
 * weak token or password offline, the rest of the config being no secret. So rotating a secret
 * alone leaves the hash as it was.
 */
export function configHash(config: GatewayConfig): string {
  let hash = hashes.get(config)
  if (hash === undefined) {
    hash = createHash('sha256').update(canonicalJson(withoutSecrets(config))).digest('hex').slice(0, 12)
    hashes.set(config, hash)
  }
  return hash
}

/**
 * The config with `admin.token`, the Redis URL's user and password and the values of
 * `tracing.headers` (sent to the collector, often its credential: SPEC 17) as markers.
 */
function withoutSecrets(config: GatewayConfig): unknown {
  // One Redis, under both spellings of the store (SPEC 12).
  const redisUrl = config.store.redis.url
  const redis = { ...config.store.redis, url: redisUrl === null ? null : redactUserinfo(redisUrl) }
  return {
    ...config,
    admin: { ...config.admin, token: config.admin.token === null ? null : SECRET_SET },
    sessions: { ...config.sessions, redis },
    store: { ...config.store, redis },
    tracing: { ...config.tracing, headers: Object.fromEntries(Object.keys(config.tracing.headers).map((name) => [name, SECRET_SET])) }
  }
}

function redactUserinfo(url: string): string {
  const parsed = new URL(url)
  if (parsed.username === '' && parsed.password === '') return url
  parsed.username = ''
  parsed.password = ''
  return `${parsed.href} ${SECRET_SET}`
}
