import { createHash } from 'node:crypto'

/** SHA-256 of a token: the only form of a credential that may be kept, logged or counted. */
export function fingerprintToken(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

/**
 * The session-map key: a hash of (tenant, token fingerprint, state key, canonical defaults)
 * (SPEC 4). Length-prefixed parts, so no choice of values can make two tuples collide.
 */
export function buildSessionKey(tenant: string, tokenFingerprint: string, stateKey: string, canonicalDefaults: string): string {
  const hash = createHash('sha256')
  for (const part of [tenant, tokenFingerprint, stateKey, canonicalDefaults]) hash.update(`${part.length}:${part}`)
  return hash.digest('base64url')
}
