import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { buildSessionKey, canonicalDefaults, fingerprintToken, SessionKeyMemo, sessionKeyPrefix, type SessionKeyDefaults } from '../../../src/sessions/session-key.js'

const TOKEN = 'demo-token-alice'
const FINGERPRINT = fingerprintToken(TOKEN, 'header')
const DEFAULTS: SessionKeyDefaults = { policy: 'strict', risk: 'high' }
const ORIGIN = 'http://127.0.0.1:4010'

describe('fingerprintToken', () => {
  it('is the SHA-256 hex digest of the token', () => {
    expect(fingerprintToken(TOKEN, 'header')).toBe(createHash('sha256').update(TOKEN).digest('hex'))
  })

  it('gives different fingerprints for different tokens', () => {
    expect(fingerprintToken('demo-token-alice', 'header')).not.toBe(fingerprintToken('demo-token-bob', 'header'))
  })

  it('hashes the bytes the client sent: a header value as Node holds it (a character per byte), a query value as text', () => {
    const token = 't\u00f6k\u00e9n'
    const utf8Digest = createHash('sha256').update(Buffer.from(token, 'utf8')).digest('hex')
    // Node's parser gives the UTF-8 bytes of a header value one character each.
    expect(fingerprintToken(Buffer.from(token, 'utf8').toString('latin1'), 'header')).toBe(utf8Digest)
    expect(fingerprintToken(token, 'text')).toBe(utf8Digest)
  })
})

describe('buildSessionKey', () => {
  it('begins with the prefix of its upstream, by which a reload drops that upstream\'s sessions alone', () => {
    const key = buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS)
    expect(key.startsWith(sessionKeyPrefix(ORIGIN))).toBe(true)
    expect(sessionKeyPrefix(ORIGIN)).toBe(`${createHash('sha256').update(ORIGIN).digest('base64url').slice(0, 8)}.`)
    const elsewhere = buildSessionKey('acme', 'https://v4.example.com', FINGERPRINT, 'state-1', DEFAULTS)
    expect(elsewhere.startsWith(sessionKeyPrefix('https://v4.example.com'))).toBe(true)
    expect(elsewhere.startsWith(sessionKeyPrefix(ORIGIN))).toBe(false)
    // The memo's key is the same text.
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS, new SessionKeyMemo())).toBe(key)
  })

  it('is deterministic for the same tenant, upstream, fingerprint, state key and defaults', () => {
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS)).toBe(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS))
  })

  it('differs per tenant', () => {
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS)).not.toBe(buildSessionKey('beta', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS))
  })

  // A session lives on one backend: a reload that moves the tenant must not hand it to the other.
  it('differs per upstream origin', () => {
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS)).not.toBe(buildSessionKey('acme', 'https://v4.example.com', FINGERPRINT, 'state-1', DEFAULTS))
  })

  it('differs per token fingerprint', () => {
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS)).not.toBe(buildSessionKey('acme', ORIGIN, fingerprintToken('demo-token-bob', 'header'), 'state-1', DEFAULTS))
  })

  it('differs per state key, the empty state key included', () => {
    const keys = new Set(['state-1', 'state-2', ''].map((stateKey) => buildSessionKey('acme', ORIGIN, FINGERPRINT, stateKey, DEFAULTS)))
    expect(keys.size).toBe(3)
  })

  it('differs per canonical defaults', () => {
    const other = { policy: 'strict', risk: 'low' }
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS)).not.toBe(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', other))
  })

  it('does not collide when characters move from one part to the next', () => {
    expect(buildSessionKey('ab', ORIGIN, FINGERPRINT, 'c', DEFAULTS)).not.toBe(buildSessionKey('a', ORIGIN, FINGERPRINT, 'bc', DEFAULTS))
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'x:1', {})).not.toBe(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'x', { policy: ':1' }))
  })

  it('tells apart state keys that differ only in lone surrogates, which UTF-8 would make one U+FFFD', () => {
    // A JSON body can carry "\ud800"; hashed as UTF-8, all three would be one key, and one session.
    const stateKeys = ['\ud800', '\udc00', '\ufffd', '\\ud800', 'a\ud800b', 'a\ufffdb']
    const keys = new Set(stateKeys.map((stateKey) => buildSessionKey('acme', ORIGIN, FINGERPRINT, stateKey, DEFAULTS)))
    expect(keys.size).toBe(stateKeys.length)
  })

  it('never contains the token or its fingerprint', () => {
    const key = buildSessionKey('acme', ORIGIN, fingerprintToken(TOKEN, 'header'), 'state-1', DEFAULTS)
    expect(key).not.toContain(TOKEN)
    expect(key).not.toContain(FINGERPRINT)
    // The upstream's tag, then the SHA-256 in base64url.
    expect(key).toMatch(/^[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]{43}$/)
  })
})

describe('with a connection memo', () => {
  it('gives what the function gives without one, for inputs that repeat and alternate', () => {
    const keys = new SessionKeyMemo()
    for (const token of ['demo-token-alice', 'demo-token-alice', 'demo-token-bob', 'demo-token-alice', 'demo-token-bob', 'demo-token-bob']) {
      for (const stateKey of ['state-1', 'state-1', '', '\ud800', '\ufffd', 'state-1']) {
        const fingerprint = fingerprintToken(token, 'header')
        expect(buildSessionKey('acme', ORIGIN, fingerprint, stateKey, DEFAULTS, keys)).toBe(buildSessionKey('acme', ORIGIN, fingerprint, stateKey, DEFAULTS))
      }
    }
  })

  // Each part alone changes the key: a memo that skipped comparing one would hand back the last key.
  it('builds a new key when any one part changes, each default included', () => {
    const base = ['acme', ORIGIN, FINGERPRINT, 'state-1'] as const
    const variants: [string, string, string, string, SessionKeyDefaults][] = [
      [...base, DEFAULTS],
      ['beta', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS],
      ['acme', 'https://v4.example.com', FINGERPRINT, 'state-1', DEFAULTS],
      ['acme', ORIGIN, fingerprintToken('demo-token-bob', 'header'), 'state-1', DEFAULTS],
      ['acme', ORIGIN, FINGERPRINT, 'state-2', DEFAULTS],
      [...base, { ...DEFAULTS, policy: 'lenient' }],
      [...base, { ...DEFAULTS, route: 'eu-west' }],
      [...base, { ...DEFAULTS, risk: 'low' }],
      [...base, {}]
    ]
    const keys = new SessionKeyMemo()
    // Each variant right after the first, from which it differs in one part only.
    for (const parts of variants) {
      expect(keys.keyFor(...(variants[0] as (typeof variants)[0]))).toBe(buildSessionKey(...(variants[0] as (typeof variants)[0])))
      expect(keys.keyFor(...parts)).toBe(buildSessionKey(...parts))
      expect(keys.keyFor(...parts)).toBe(buildSessionKey(...parts))
    }
    expect(new Set(variants.map((parts) => buildSessionKey(...parts))).size).toBe(variants.length)
  })

  it('keeps lone surrogates apart through the memo as without it', () => {
    const keys = new SessionKeyMemo()
    const built = ['\ud800', '\udc00', '\ufffd'].map((stateKey) => buildSessionKey('acme', ORIGIN, FINGERPRINT, stateKey, DEFAULTS, keys))
    expect(new Set(built).size).toBe(3)
  })

  it('shows none of its parts when printed', () => {
    const keys = new SessionKeyMemo()
    keys.keyFor('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS)
    expect(JSON.stringify(keys)).toBe('{}')
    expect(String(Object.keys(keys))).toBe('')
  })
})

describe('canonicalDefaults', () => {
  it('is the same for equal defaults written in another key order', () => {
    expect(canonicalDefaults({ policy: 'p', route: 'r' })).toBe(canonicalDefaults({ route: 'r', policy: 'p' }))
  })

  it('differs when one default differs', () => {
    expect(canonicalDefaults({ policy: 'p', risk: 'low' })).not.toBe(canonicalDefaults({ policy: 'p', risk: 'high' }))
  })

  it('tells apart the same value under different fields', () => {
    expect(canonicalDefaults({ policy: 'x' })).not.toBe(canonicalDefaults({ route: 'x' }))
  })

  it('tells apart no defaults from an empty-string default', () => {
    expect(canonicalDefaults({})).not.toBe(canonicalDefaults({ policy: '' }))
  })

  it('cannot be forged by a value that spells out the JSON of other fields, or by lone surrogates', () => {
    // The session-map key hashes this as UTF-8, where a lone surrogate would read U+FFFD: JSON escapes it.
    const forged = [{ policy: 'p', route: 'r' }, { policy: 'p","r' }, { policy: 'p",null,"r' }, { policy: '\ud800' }, { policy: '\udc00' }, { policy: '\ufffd' }, {}]
    const texts = forged.map(canonicalDefaults)
    expect(new Set(texts).size).toBe(forged.length)
    expect(texts.every((text) => text.isWellFormed())).toBe(true)
  })
})
