import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { buildSessionKey, fingerprintToken } from '../../../src/sessions/session-key.js'
import { OneEntryMemo } from '../../../src/util/one-entry-memo.js'

const TOKEN = 'demo-token-alice'
const FINGERPRINT = fingerprintToken(TOKEN)
const DEFAULTS = JSON.stringify(['strict', null, 'high'])
const ORIGIN = 'http://127.0.0.1:4010'

describe('fingerprintToken', () => {
  it('is the SHA-256 hex digest of the token', () => {
    expect(fingerprintToken(TOKEN)).toBe(createHash('sha256').update(TOKEN).digest('hex'))
  })

  it('gives different fingerprints for different tokens', () => {
    expect(fingerprintToken('demo-token-alice')).not.toBe(fingerprintToken('demo-token-bob'))
  })
})

describe('buildSessionKey', () => {
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
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS)).not.toBe(buildSessionKey('acme', ORIGIN, fingerprintToken('demo-token-bob'), 'state-1', DEFAULTS))
  })

  it('differs per state key, the empty state key included', () => {
    const keys = new Set(['state-1', 'state-2', ''].map((stateKey) => buildSessionKey('acme', ORIGIN, FINGERPRINT, stateKey, DEFAULTS)))
    expect(keys.size).toBe(3)
  })

  it('differs per canonical defaults', () => {
    const other = JSON.stringify(['strict', null, 'low'])
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', DEFAULTS)).not.toBe(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'state-1', other))
  })

  it('does not collide when characters move from one part to the next', () => {
    expect(buildSessionKey('ab', ORIGIN, FINGERPRINT, 'c', DEFAULTS)).not.toBe(buildSessionKey('a', ORIGIN, FINGERPRINT, 'bc', DEFAULTS))
    expect(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'x:1', '')).not.toBe(buildSessionKey('acme', ORIGIN, FINGERPRINT, 'x', ':1'))
  })

  it('tells apart state keys that differ only in lone surrogates, which UTF-8 would make one U+FFFD', () => {
    // A JSON body can carry "\ud800"; hashed as UTF-8, all three would be one key, and one session.
    const stateKeys = ['\ud800', '\udc00', '\ufffd', '\\ud800', 'a\ud800b', 'a\ufffdb']
    const keys = new Set(stateKeys.map((stateKey) => buildSessionKey('acme', ORIGIN, FINGERPRINT, stateKey, DEFAULTS)))
    expect(keys.size).toBe(stateKeys.length)
  })

  it('never contains the token or its fingerprint', () => {
    const key = buildSessionKey('acme', ORIGIN, fingerprintToken(TOKEN), 'state-1', DEFAULTS)
    expect(key).not.toContain(TOKEN)
    expect(key).not.toContain(FINGERPRINT)
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/)
  })
})

describe('with a connection memo', () => {
  it('gives what the function gives without one, for inputs that repeat and alternate', () => {
    const [fingerprints, keys] = [new OneEntryMemo(), new OneEntryMemo()]
    for (const token of ['demo-token-alice', 'demo-token-alice', 'demo-token-bob', 'demo-token-alice', 'demo-token-bob', 'demo-token-bob']) {
      expect(fingerprintToken(token, fingerprints)).toBe(fingerprintToken(token))
      for (const stateKey of ['state-1', 'state-1', '', '\ud800', '\ufffd', 'state-1']) {
        const fingerprint = fingerprintToken(token)
        expect(buildSessionKey('acme', ORIGIN, fingerprint, stateKey, DEFAULTS, keys)).toBe(buildSessionKey('acme', ORIGIN, fingerprint, stateKey, DEFAULTS))
      }
    }
  })

  it('keeps lone surrogates apart through the memo as without it', () => {
    const keys = new OneEntryMemo()
    const built = ['\ud800', '\udc00', '\ufffd'].map((stateKey) => buildSessionKey('acme', ORIGIN, FINGERPRINT, stateKey, DEFAULTS, keys))
    expect(new Set(built).size).toBe(3)
  })
})
