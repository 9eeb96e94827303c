import { hash } from 'node:crypto'
import { headerValueBytes } from '../util/header-value-bytes.js'
import type { OneEntryMemo } from '../util/one-entry-memo.js'

/** The session defaults a key is made with (SPEC 4 session-execute step 1). */
export interface SessionKeyDefaults {
  readonly policy?: string | undefined
  readonly route?: string | undefined
  readonly risk?: string | undefined
}

/**
 * SHA-256 of a token: the only form of a credential that may be kept, logged or counted. With
 * `memo` (the connection's, kernel/connection-memo.ts), a token hashed last time is not hashed again.
 * `held`: how the string holds the client's bytes. A header value has one character per byte, as
 * Node's HTTP parser gives it; a query parameter is text, percent-decoded as UTF-8. Either way a
 * token the client sent as UTF-8 hashes as `v4gw fingerprint` hashes the same line (SPEC 12).
 */
export function fingerprintToken(token: string, held: 'header' | 'text', memo?: OneEntryMemo): string {
  const sha256 = held === 'header' ? sha256OfHeaderValue : sha256OfText
  return memo === undefined ? sha256(token) : memo.of(token, sha256)
}

function sha256OfHeaderValue(value: string): string {
  return hash('sha256', headerValueBytes(value), 'hex')
}

function sha256OfText(text: string): string {
  // One-shot crypto.hash (Node 20.12+): no Hash object per request.
  return hash('sha256', text, 'hex')
}

/**
 * The session-map key: a hash of (tenant, token fingerprint, state key, canonical defaults)
 * (SPEC 4), and of the upstream origin the session lives on. A session exists on one backend:
 * after a reload moves a tenant, requests that began before it (their calls go to the old
 * upstream) and after it (the new one) must neither share an entry nor join each other's
 * `sessions.start`, and no interleaving of the two can mix them when the origin is in the key.
 * Length-prefixed parts, so no choice of values can make two tuples collide. The key's text is
 * the origin's tag (sessionKeyPrefix) then the hash. With `memo`, the same parts as last time are
 * not hashed again.
 */
export function buildSessionKey(tenant: string, upstreamOrigin: string, tokenFingerprint: string, stateKey: string, defaults: SessionKeyDefaults, memo?: SessionKeyMemo): string {
  return memo === undefined ? sessionKey(tenant, upstreamOrigin, tokenFingerprint, stateKey, defaults) : memo.keyFor(tenant, upstreamOrigin, tokenFingerprint, stateKey, defaults)
}

/** Canonical JSON of the defaults (SPEC 4): fixed key order, so equal defaults give equal map keys. */
export function canonicalDefaults(defaults: SessionKeyDefaults): string {
  return JSON.stringify([defaults.policy ?? null, defaults.route ?? null, defaults.risk ?? null])
}

/**
 * The session key a connection built last (kernel/connection-memo.ts), by its parts: a request
 * with the same parts as the one before gets it for a few compares of strings that are mostly
 * the same objects (the tenant's, the remembered fingerprint). Remembered by parts rather than
 * by the text they make: that text is built anew per request, and comparing it flattens it
 * first (by parts, a session-hit request measured -1.2 %: docs/performance.md).
 * Private fields, as OneEntryMemo's: a printed connection never shows them.
 */
export class SessionKeyMemo {
  #tenant: string | undefined = undefined
  #upstreamOrigin = ''
  #tokenFingerprint = ''
  #stateKey = ''
  #policy: string | undefined = undefined
  #route: string | undefined = undefined
  #risk: string | undefined = undefined
  #key = ''

  keyFor(tenant: string, upstreamOrigin: string, tokenFingerprint: string, stateKey: string, defaults: SessionKeyDefaults): string {
    const { policy, route, risk } = defaults
    if (
      tenant === this.#tenant &&
      upstreamOrigin === this.#upstreamOrigin &&
      tokenFingerprint === this.#tokenFingerprint &&
      stateKey === this.#stateKey &&
      policy === this.#policy &&
      route === this.#route &&
      risk === this.#risk
    ) {
      return this.#key
    }
    const key = sessionKey(tenant, upstreamOrigin, tokenFingerprint, stateKey, defaults)
    this.#tenant = tenant
    this.#upstreamOrigin = upstreamOrigin
    this.#tokenFingerprint = tokenFingerprint
    this.#stateKey = stateKey
    this.#policy = policy
    this.#route = route
    this.#risk = risk
    this.#key = key
    return key
  }
}

function sessionKey(tenant: string, upstreamOrigin: string, tokenFingerprint: string, stateKey: string, defaults: SessionKeyDefaults): string {
  const canonical = canonicalDefaults(defaults)
  const parts = `${tenant.length}:${tenant}${upstreamOrigin.length}:${upstreamOrigin}${tokenFingerprint.length}:${tokenFingerprint}${stateKey.length}:${stateKey}${canonical.length}:${canonical}`
  // Hashing encodes UTF-8, which turns every lone surrogate (a JSON body may hold "\ud800") into
  // U+FFFD, so such parts go in escaped, after a mark no well-formed string starts with (a digit does).
  return `${sessionKeyPrefix(upstreamOrigin)}${hash('sha256', parts.isWellFormed() ? parts : `\u0000${JSON.stringify(parts)}`, 'base64url')}`
}

/** Origin prefixes made so far: a gateway's upstreams are the config's few (reloads add some). */
const ORIGIN_PREFIXES = new Map<string, string>()

/**
 * How every session-map key of sessions on `upstreamOrigin` begins: 8 base64url characters of the
 * origin's SHA-256 and a dot. A reload that moves a tenant drops by it the entries of the upstream
 * the tenant left (SPEC 8), and only those: with Redis, other replicas that reloaded first have
 * already stored sessions of the new upstream under the same tenant, and a clear of the whole
 * tenant would make them start each one again (docs/scaling.md).
 */
export function sessionKeyPrefix(upstreamOrigin: string): string {
  let prefix = ORIGIN_PREFIXES.get(upstreamOrigin)
  if (prefix === undefined) {
    prefix = `${hash('sha256', upstreamOrigin, 'base64url').slice(0, 8)}.`
    if (ORIGIN_PREFIXES.size < 1_000) ORIGIN_PREFIXES.set(upstreamOrigin, prefix)
  }
  return prefix
}
