import { Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { connectionMemo } from '../../../src/kernel/connection-memo.js'

describe('connectionMemo', () => {
  it('is the same memo for every request of one connection', () => {
    const socket = new Socket()
    expect(connectionMemo(socket)).toBe(connectionMemo(socket))
  })

  it('is never shared by two connections, so one never answers with what another presented', () => {
    const [one, two] = [connectionMemo(new Socket()), connectionMemo(new Socket())]
    expect(one).not.toBe(two)
    expect(one.credentialFingerprint).not.toBe(two.credentialFingerprint)
    expect(one.sessionKey).not.toBe(two.sessionKey)
  })

  it('keeps the credential and session-key digests apart', () => {
    const memo = connectionMemo(new Socket())
    expect(memo.credentialFingerprint).not.toBe(memo.sessionKey)
  })
})
