/**
 * Redis key names of the shared session map (docs/scaling.md). A key holds only the tenant name
 * (config, not client input) and the session-map key: a tag of the upstream origin, then a hash
 * of the tenant, that origin, the token's fingerprint, the state key and the defaults
 * (session-key.ts): never a raw token.
 *
 *   <prefix>s:<tenant>:<map key>   the session id, PX sessions.ttlMs
 *   <prefix>l:<tenant>:<map key>   the start lock, "<random owner token> <owner's wait bound ms>", PX lockMs
 *
 * The tenant sits in the key so that one tenant's entries can be found with SCAN MATCH (no KEYS,
 * no index to keep in step), and the origin's tag after it so that those of one upstream can
 * (a reload that moves the tenant). Tenant names cannot hold ':' or glob characters (config schema).
 */
export interface RedisKeys {
  session(tenant: string, key: string): string
  lock(tenant: string, key: string): string
  /** SCAN MATCH pattern of one tenant's session entries (those whose map key begins with `keyPrefix`), or of all of them. */
  sessionPattern(tenant?: string, keyPrefix?: string): string
  /** The tenant named by a session entry's key, undefined for any other key. */
  tenantOf(redisKey: string): string | undefined
}

/** Backslash-escapes what SCAN MATCH would read as a glob, so any prefix matches literally. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (character) => `\\${character}`)
}

export function buildRedisKeys(prefix: string): RedisKeys {
  const sessions = `${prefix}s:`
  return {
    session: (tenant, key) => `${sessions}${tenant}:${key}`,
    lock: (tenant, key) => `${prefix}l:${tenant}:${key}`,
    sessionPattern: (tenant, keyPrefix = '') => `${escapeGlob(sessions)}${tenant === undefined ? '' : `${escapeGlob(tenant)}:${escapeGlob(keyPrefix)}`}*`,
    tenantOf(redisKey) {
      if (!redisKey.startsWith(sessions)) return undefined
      const end = redisKey.indexOf(':', sessions.length)
      return end === -1 ? undefined : redisKey.slice(sessions.length, end)
    }
  }
}
