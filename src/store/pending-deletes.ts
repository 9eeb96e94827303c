import type { RedisConnection } from './redis-connection.js'

/** Deletes kept to send again: each key ends with its own expiry anyway, so a flood is only bounded. */
const MAX_PENDING = 10_000

/**
 * Deletes of keys this replica may have left in the store without meaning to: a claim or a lock
 * whose command it gave up on (a stalled Redis that goes on, or ioredis sending the command again
 * on its next connection, `autoResendUnfulfilledCommands`), or a release the store did not take.
 * Left, such a key holds up every replica until it expires. `send` deletes `key` only while it
 * still holds `owner`; each delete goes at once (after the command, on the same connection) and,
 * if it could not be sent, again once the store is up: ioredis sends what it resends before it
 * reports the connection ready, so the delete comes after it.
 */
export function pendingDeletes(connection: RedisConnection, send: (key: string, owner: string) => Promise<unknown>): (key: string, owner: string) => void {
  const pending = new Map<string, string>()
  const attempt = (owner: string, key: string): void => {
    send(key, owner).then(
      () => pending.delete(owner),
      () => undefined
    )
  }
  connection.onChange((up) => {
    if (up) for (const [owner, key] of pending) attempt(owner, key)
  })
  return (key, owner) => {
    if (pending.size < MAX_PENDING) pending.set(owner, key)
    attempt(owner, key)
  }
}
