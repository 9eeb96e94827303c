import { describe, expect, it } from 'vitest'
import { createSharedStore } from '../../../src/store/shared-store.js'
import { useRedisServer } from '../../helpers/redis-server.js'
import { ownedByTest } from '../../helpers/teardown.js'

/**
 * The client registry keeps each route's sunset evidence without a TTL, which only an
 * `allkeys-*` policy can evict: a store under one is warned about when it comes up.
 */
const redis = useRedisServer()

async function warningsWith(policy: string): Promise<Array<Record<string, unknown>>> {
  await redis.client().config('SET', 'maxmemory-policy', policy)
  const warnings: Array<Record<string, unknown>> = []
  const logger = { info: () => undefined, warn: (fields: Record<string, unknown>) => warnings.push(fields) }
  const store = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: `policy-${policy}:`, logger }), (shared) => shared.close())
  // The check is sent when the store comes up, before this resolves: a PING on the same
  // connection is answered after it.
  await store.connection?.run((client) => client.ping())
  await new Promise((resolve) => setImmediate(resolve))
  return warnings
}

describe('the eviction policy of the store (docs/decisions.md, registry evidence)', () => {
  it('warns under allkeys-lru, naming the policy and what may go', async () => {
    const warnings = await warningsWith('allkeys-lru')
    expect(warnings).toEqual([expect.objectContaining({ store: 'redis', maxmemoryPolicy: 'allkeys-lru' })])
  })

  it('says nothing under volatile-lru (the shipped policy) or noeviction', async () => {
    expect(await warningsWith('volatile-lru')).toEqual([])
    expect(await warningsWith('noeviction')).toEqual([])
  })
})
