import { hash } from 'node:crypto'
import type { OneEntryMemo } from '../util/one-entry-memo.js'

/**
 * SHA-256 of a token: the only form of a credential that may be kept, logged or counted. With
 * `memo` (the connection's, kernel/connection-memo.ts), a token hashed last time is not hashed again.
 */
export function fingerprintToken(token: string, memo?: OneEntryMemo): string {
  return memo === undefined ? sha256Hex(token) : memo.of(token, sha256Hex)
}

function sha256Hex(token: string): string {
  // One-shot crypto.hash (Node 20.12+): no Hash object per request.
  return hash('sha256', token, 'hex')
}

/**
 * The session-map key: a hash of (tenant, token fingerprint, state key, canonical defaults)
 * (SPEC 4), and of the upstream origin the session lives on. A session exists on one backend:
 * after a reload moves a tenant, requests that began before it (their calls go to the old
 * upstream) and after it (the new one) must neither share an entry nor join each other's
 * `sessions.start`, and no interleaving of the two can mix them when the origin is in the key.
 * Length-prefixed parts, so no choice of values can make two tuples collide. With `memo`, the
 * same parts as last time are not hashed again.
 */
export function buildSessionKey(tenant: string, upstreamOrigin: string, tokenFingerprint: string, stateKey: string, canonicalDefaults: string, memo?: OneEntryMemo): string {
  const parts = `${tenant.length}:${tenant}${upstreamOrigin.length}:${upstreamOrigin}${tokenFingerprint.length}:${tokenFingerprint}${stateKey.length}:${stateKey}${canonicalDefaults.length}:${canonicalDefaults}`
  return memo === undefined ? sessionKeyDigest(parts) : memo.of(parts, sessionKeyDigest)
}

function sessionKeyDigest(parts: string): string {
  // Hashing encodes UTF-8, which turns every lone surrogate (a JSON body may hold "\ud800") into
  // U+FFFD, so such parts go in escaped, after a mark no well-formed string starts with (a digit does).
  return hash('sha256', parts.isWellFormed() ? parts : `\u0000${JSON.stringify(parts)}`, 'base64url')
}
