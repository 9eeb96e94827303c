import type { Socket } from 'node:net'
import { SessionKeyMemo } from '../sessions/session-key.js'
import { OneEntryMemo } from '../util/one-entry-memo.js'

/**
 * What a connection remembers from one request to the next: the SHA-256 digests its last request
 * needed. A client on a kept-alive connection presents the same credential, and mostly the same
 * state, on every request, and each legacy runtime request hashes both (SPEC 4's session key,
 * SPEC 12's client id): remembered, a repeat costs a string compare instead of a hash. Kept with
 * the connection (a WeakMap on its socket), so a credential is held no longer than the connection
 * that presented it, and never shared with another connection (docs/decisions.md).
 */
export interface ConnectionMemo {
  /** The presented credential's SHA-256 (sessions/session-key.ts fingerprintToken). */
  readonly credentialFingerprint: OneEntryMemo
  /** The session-map key, its upstream's tag and SHA-256 (sessions/session-key.ts buildSessionKey). */
  readonly sessionKey: SessionKeyMemo
}

const memos = new WeakMap<Socket, ConnectionMemo>()

export function connectionMemo(socket: Socket): ConnectionMemo {
  let memo = memos.get(socket)
  if (memo === undefined) {
    memo = { credentialFingerprint: new OneEntryMemo(), sessionKey: new SessionKeyMemo() }
    memos.set(socket, memo)
  }
  return memo
}
