import { describe, expect, it, vi } from 'vitest'
import { createSessionMap, type StartResult } from '../../../src/sessions/session-map.js'
import { createMemorySessionStore, type SessionEntry, type SessionStore } from '../../../src/sessions/session-store.js'

function newMap() {
  const store = createMemorySessionStore({ maxEntries: 100, ttlMs: 60_000 })
  return { store, map: createSessionMap<{ status: number }>(store) }
}

describe('createSessionMap', () => {
  it('starts a session on a miss and stores it under the key with its tenant', async () => {
    const { store, map } = newMap()
    const resolved = await map.resolve('k', 'acme', async () => ({ sessionId: 'ses_1' }))
    expect(resolved).toEqual({ result: { sessionId: 'ses_1' }, outcome: 'miss' })
    expect(store.get('k')).toEqual({ sessionId: 'ses_1', tenant: 'acme' })
  })

  it('answers a stored key as a hit without starting, at once when the store answers at once', async () => {
    const { map } = newMap()
    await map.resolve('k', 'acme', async () => ({ sessionId: 'ses_1' }))
    const start = vi.fn(async (): Promise<StartResult<{ status: number }>> => ({ sessionId: 'ses_2' }))
    const answer = map.resolve('k', 'acme', start)
    // The hot path: no promise, so no turns of the microtask queue for a hit.
    expect(answer).not.toBeInstanceOf(Promise)
    expect(answer).toEqual({ result: { sessionId: 'ses_1' }, outcome: 'hit' })
    expect(start).not.toHaveBeenCalled()
  })

  // A store that answers later: a shared one asked over the network, or an embedder's on another promise library.
  it.each([
    ['a promise', <T>(value: T): PromiseLike<T> => Promise.resolve(value)],
    ['a thenable of its own, not taking it for an entry', <T>(value: T): PromiseLike<T> => ({ then: (onFulfilled) => Promise.resolve(value).then(onFulfilled) }) as PromiseLike<T>]
  ])('waits for a store that answers with %s', async (_, later) => {
    const memory = createMemorySessionStore({ maxEntries: 100, ttlMs: 60_000 })
    const store = { ...memory, get: (key: string) => later(memory.get(key)), set: (key: string, entry: SessionEntry) => memory.set(key, entry), size: 0 } as unknown as SessionStore
    const map = createSessionMap<{ status: number }>(store)
    const start = vi.fn(async (): Promise<StartResult<{ status: number }>> => ({ sessionId: 'ses_1' }))
    await expect(map.resolve('k', 'acme', start)).resolves.toEqual({ result: { sessionId: 'ses_1' }, outcome: 'miss' })
    await expect(map.resolve('k', 'acme', start)).resolves.toEqual({ result: { sessionId: 'ses_1' }, outcome: 'hit' })
    expect(start).toHaveBeenCalledTimes(1)
  })

  it('starts once for concurrent misses and reports the waiters as coalesced', async () => {
    const { map } = newMap()
    const start = vi.fn(async (): Promise<StartResult<{ status: number }>> => {
      await new Promise((resolve) => setTimeout(resolve, 10))
      return { sessionId: 'ses_1' }
    })
    const resolved = await Promise.all(Array.from({ length: 20 }, () => map.resolve('k', 'acme', start)))
    expect(start).toHaveBeenCalledTimes(1)
    expect(resolved.map((entry) => entry.outcome).sort()).toEqual(['miss', ...Array<string>(19).fill('coalesced')].sort())
    expect(new Set(resolved.map((entry) => entry.result.sessionId))).toEqual(new Set(['ses_1']))
  })

  it('reports a failed start once with its tenant, however many callers shared it, and not a rejection', async () => {
    const store = createMemorySessionStore({ maxEntries: 100, ttlMs: 60_000 })
    const failed: [string, unknown][] = []
    const map = createSessionMap<{ status: number }>(store, { onStartFailed: (tenant, error) => failed.push([tenant, error]) })
    const reset = new Error('reset')
    const start = async (): Promise<StartResult<{ status: number }>> => {
      await new Promise((resolve) => setTimeout(resolve, 10))
      throw reset
    }
    const outcomes = await Promise.allSettled(Array.from({ length: 3 }, () => map.resolve('k', 'acme', start)))
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected', 'rejected'])
    expect(failed).toEqual([['acme', reset]])
    await map.resolve('k', 'acme', async () => ({ rejection: { status: 401 } }))
    expect(failed).toHaveLength(1)
  })

  it('hands a rejection to the caller and stores nothing', async () => {
    const { store, map } = newMap()
    const resolved = await map.resolve('k', 'acme', async () => ({ rejection: { status: 401 } }))
    expect(resolved.result.rejection).toEqual({ status: 401 })
    expect(store.size).toBe(0)
  })

  it('passes a thrown start error to the caller and stores nothing', async () => {
    const { store, map } = newMap()
    await expect(map.resolve('k', 'acme', () => Promise.reject(new Error('bad answer')))).rejects.toThrow('bad answer')
    expect(store.size).toBe(0)
  })

  it('evict removes the entry that names the session', async () => {
    const { store, map } = newMap()
    await map.resolve('k', 'acme', async () => ({ sessionId: 'ses_1' }))
    await map.evict('k', 'acme', 'ses_1')
    expect(store.get('k')).toBeUndefined()
  })

  it('evict keeps an entry that already names a newer session', async () => {
    const { store, map } = newMap()
    store.set('k', { sessionId: 'ses_2', tenant: 'acme' })
    await map.evict('k', 'acme', 'ses_1')
    expect(await store.get('k')).toEqual({ sessionId: 'ses_2', tenant: 'acme' })
  })

  it('reports an eviction once per entry removed, not once per request that asked for it', async () => {
    const store = createMemorySessionStore({ maxEntries: 100, ttlMs: 60_000 })
    const onEvict = vi.fn()
    const map = createSessionMap<{ status: number }>(store, { onEvict })
    await map.resolve('k', 'acme', async () => ({ sessionId: 'ses_1' }))
    // Three requests that shared ses_1 all saw it answer 404, and one of them has already started ses_2.
    await Promise.all([map.evict('k', 'acme', 'ses_1'), map.evict('k', 'acme', 'ses_1')])
    store.set('k', { sessionId: 'ses_2', tenant: 'acme' })
    await map.evict('k', 'acme', 'ses_1')
    expect(onEvict).toHaveBeenCalledTimes(1)
  })
})
