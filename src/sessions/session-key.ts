import { hash } from 'node:crypto'

/** SHA-256 of a token: the only form of a credential that may be kept, logged or counted. */
export function fingerprintToken(token: string): string {
  // One-shot crypto.hash (Node 20.12+): no Hash object per request.
  return hash('sha256', token, 'hex')
}

/**
 * The session-map key: a hash of (tenant, token fingerprint, state key, canonical defaults)
 * (SPEC 4). Length-prefixed parts, so no choice of values can make two tuples collide.
 */
export function buildSessionKey(tenant: string, tokenFingerprint: string, stateKey: string, canonicalDefaults: string): string {
  return hash('sha256', `${tenant.length}:${tenant}${tokenFingerprint.length}:${tokenFingerprint}${stateKey.length}:${stateKey}${canonicalDefaults.length}:${canonicalDefaults}`, 'base64url')
}
