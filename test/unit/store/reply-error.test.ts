import { describe, expect, it } from 'vitest'
import { isReplyError } from '../../../src/store/redis-connection.js'
import { createSharedStore } from '../../../src/store/shared-store.js'
import { useRedisServer } from '../../helpers/redis-server.js'
import { ownedByTest } from '../../helpers/teardown.js'

/**
 * What a failed command may have left in the store decides whether it is cleaned up after
 * (store/pending-deletes.ts): a server's error reply applied nothing; a timeout may have.
 */
const redis = useRedisServer()

describe('isReplyError', () => {
  it('is true of the server\'s own error reply (an unknown command, a refused script), false of a timeout', async () => {
    const store = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: 'reply-error:', logger: { info: () => undefined, warn: () => undefined } }), (shared) => shared.close())
    const connection = store.connection!
    const refused = await connection.run((client) => client.call('NO-SUCH-COMMAND')).catch((error: unknown) => error)
    expect(isReplyError(refused)).toBe(true)
    const scriptError = await connection.run((client) => client.eval("return redis.error_reply('refused')", 0)).catch((error: unknown) => error)
    expect(isReplyError(scriptError)).toBe(true)
    // A server that answers nothing within the command timeout: the command may still run later.
    await redis.client().call('CLIENT', 'PAUSE', '1300', 'ALL')
    const timedOut = await connection.run((client) => client.get('reply-error:k')).catch((error: unknown) => error)
    expect(timedOut).toBeInstanceOf(Error)
    expect(isReplyError(timedOut)).toBe(false)
  })
})
