import { describe, expect, it } from 'vitest'
import { looksLikeServiceKey, maskCredentials } from '../../../src/credentials/credentials-in-text.js'

describe('credentials found in text by their shape', () => {
  it.each([
    ['key_live_4f1c9a', true],
    ['key_0123456789', true],
    ['key_id', false],
    ['key_rotation', false],
    ['key_v2', false],
    ['key_AbCdEfGhIjKlMnOpQr', true],
    ['monkey_live_4f1c9a', false]
  ])('takes %s for a service key: %s', (word, expected) => {
    expect(looksLikeServiceKey(word, 'key_')).toBe(expected)
  })

  it('honours another service-key prefix', () => {
    expect(looksLikeServiceKey('sk-proj-4f1c9a', 'sk-')).toBe(true)
    expect(looksLikeServiceKey('key_live_4f1c9a', 'sk-')).toBe(false)
  })

  it.each([
    ['V4 rejects token refresh for mobile', 'V4 rejects token refresh for mobile'],
    ['paused during key_rotation', 'paused during key_rotation'],
    ['Bearer pasted-in-a-note', 'Bearer [redacted]'],
    ['rollback: basic auth clients failing', 'rollback: basic [redacted] clients failing'],
    ['Token tok-pasted-as-until', 'Token [redacted]'],
    ['the caller sent token tok-123', 'the caller sent token [redacted]'],
    ['a token abcdefghijklmnopqrstuvwxyz came', 'a token [redacted] came'],
    ['x token=tok-123, password: hunter2', 'x token=[redacted], password: [redacted]'],
    ['INC-9: the caller used key_live_pasted1 by mistake', 'INC-9: the caller used [redacted] by mistake'],
    ['(key_live_4f1c9a)', '([redacted])'],
    ['see `key_live_4f1c9a` and /keys/key_live_5e2d8b', 'see `[redacted]` and /keys/[redacted]'],
    ['access_token=abc, client_secret: s3cr3t, db_password=hunter2', 'access_token=[redacted], client_secret: [redacted], db_password=[redacted]']
  ])('masks %j as %j', (text, masked) => {
    expect(maskCredentials(text, 'key_')).toBe(masked)
  })
})
