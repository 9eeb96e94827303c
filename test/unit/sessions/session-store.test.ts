import { describe, expect, it } from 'vitest'
import { sessionKeyPrefix } from '../../../src/sessions/session-key.js'
import { createMemorySessionStore, type SessionEntry, type SessionStore } from '../../../src/sessions/session-store.js'

/** The stores' clock, moved by the tests: an entry's life is counted on it, not on the wall clock. */
let nowMs = 1_000
const now = (): number => nowMs
function advance(ms: number): void {
  nowMs += ms
}

function store(maxEntries = 100, ttlMs = 60_000): SessionStore {
  return createMemorySessionStore({ maxEntries, ttlMs, now })
}

/** The in-memory store answers synchronously (the interface also allows a shared, async store). */
function entryAt(sessions: SessionStore, key: string): SessionEntry | undefined {
  return sessions.get(key) as SessionEntry | undefined
}

describe('createMemorySessionStore', () => {
  it('returns the entry that was set under a key', () => {
    const sessions = store()
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    expect(sessions.get('k1')).toEqual({ sessionId: 'ses_1', tenant: 'acme' })
    expect(sessions.get('other')).toBeUndefined()
  })

  it('counts no entry past its TTL in size or in what a full clear reports, read or not', () => {
    const sessions = store(100, 30)
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    sessions.set('k2', { sessionId: 'ses_2', tenant: 'acme' })
    advance(60)
    // Nothing read them since: the gauge (size) and /admin/sessions (countByTenant) agree.
    expect(sessions.size).toBe(0)
    expect(sessions.countByTenant()).toEqual({})
    sessions.set('k3', { sessionId: 'ses_3', tenant: 'acme' })
    advance(60)
    expect(sessions.clear()).toBe(0)
  })

  it('reports an entry pushed out at maxEntries while still live, not one that had expired', () => {
    let evicted = 0
    const sessions = createMemorySessionStore({ maxEntries: 2, ttlMs: 30, onCapacityEvict: () => evicted++, now })
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    sessions.set('k2', { sessionId: 'ses_2', tenant: 'acme' })
    advance(60)
    sessions.set('k3', { sessionId: 'ses_3', tenant: 'acme' })
    sessions.set('k4', { sessionId: 'ses_4', tenant: 'acme' })
    expect(evicted).toBe(0)
    sessions.set('k5', { sessionId: 'ses_5', tenant: 'acme' })
    expect(evicted).toBe(1)
  })

  it('keeps at most maxEntries and drops the least recently set entry first', () => {
    const sessions = store(2)
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    sessions.set('k2', { sessionId: 'ses_2', tenant: 'acme' })
    sessions.set('k3', { sessionId: 'ses_3', tenant: 'acme' })
    expect(sessions.size).toBe(2)
    expect(sessions.get('k1')).toBeUndefined()
    expect(entryAt(sessions, 'k2')?.sessionId).toBe('ses_2')
    expect(entryAt(sessions, 'k3')?.sessionId).toBe('ses_3')
  })

  it('counts a get as a use, so the least recently used entry goes first at maxEntries', () => {
    const sessions = store(2)
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    sessions.set('k2', { sessionId: 'ses_2', tenant: 'acme' })
    sessions.get('k1')
    sessions.set('k3', { sessionId: 'ses_3', tenant: 'acme' })
    expect(entryAt(sessions, 'k1')?.sessionId).toBe('ses_1')
    expect(sessions.get('k2')).toBeUndefined()
    expect(entryAt(sessions, 'k3')?.sessionId).toBe('ses_3')
  })

  it('expires an entry ttlMs after its creation', () => {
    const sessions = store(100, 50)
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    expect(entryAt(sessions, 'k1')?.sessionId).toBe('ses_1')
    advance(80)
    expect(sessions.get('k1')).toBeUndefined()
  })

  it('counts ttlMs from creation: a get does not extend an entry', () => {
    const sessions = store(100, 150)
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    advance(40)
    // Inside its life: a refreshing get would push the expiry to ~190 ms after creation.
    expect(entryAt(sessions, 'k1')?.sessionId).toBe('ses_1')
    advance(130)
    // ~170 ms after creation, ~130 ms after the get.
    expect(sessions.get('k1')).toBeUndefined()
  })

  it('deleteIfSession deletes the entry while it still names that session', () => {
    const sessions = store()
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    expect(sessions.deleteIfSession('k1', 'ses_1', 'acme')).toBe(true)
    expect(sessions.get('k1')).toBeUndefined()
    expect(sessions.size).toBe(0)
  })

  it('deleteIfSession keeps a newer entry that names another session', () => {
    const sessions = store()
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    sessions.set('k1', { sessionId: 'ses_2', tenant: 'acme' })
    expect(sessions.deleteIfSession('k1', 'ses_1', 'acme')).toBe(false)
    expect(entryAt(sessions, 'k1')?.sessionId).toBe('ses_2')
  })

  it('deleteIfSession on a missing key changes nothing', () => {
    const sessions = store()
    sessions.set('k1', { sessionId: 'ses_1', tenant: 'acme' })
    expect(sessions.deleteIfSession('missing', 'ses_1', 'acme')).toBe(false)
    expect(sessions.size).toBe(1)
  })

  it('clear(tenant) drops only that tenant and returns how many went', () => {
    const sessions = store()
    sessions.set('a1', { sessionId: 'ses_a1', tenant: 'acme' })
    sessions.set('b1', { sessionId: 'ses_b1', tenant: 'beta' })
    sessions.set('a2', { sessionId: 'ses_a2', tenant: 'acme' })
    expect(sessions.clear('acme')).toBe(2)
    expect(sessions.get('a1')).toBeUndefined()
    expect(sessions.get('a2')).toBeUndefined()
    expect(entryAt(sessions, 'b1')?.sessionId).toBe('ses_b1')
    expect(sessions.size).toBe(1)
  })

  it('clear(tenant, upstreamOrigin) drops only the entries of sessions on that upstream', () => {
    const sessions = store()
    const [left, moved] = [sessionKeyPrefix('http://old.example:4010'), sessionKeyPrefix('http://new.example:4010')]
    sessions.set(`${left}a`, { sessionId: 'ses_old', tenant: 'acme' })
    sessions.set(`${moved}a`, { sessionId: 'ses_new', tenant: 'acme' })
    sessions.set(`${left}b`, { sessionId: 'ses_beta', tenant: 'beta' })
    expect(sessions.clear('acme', 'http://old.example:4010')).toBe(1)
    expect(sessions.get(`${left}a`)).toBeUndefined()
    expect(entryAt(sessions, `${moved}a`)?.sessionId).toBe('ses_new')
    expect(entryAt(sessions, `${left}b`)?.sessionId).toBe('ses_beta')
  })

  it('clear(tenant) drops every entry of the tenant whatever the order of use', () => {
    const sessions = store()
    for (let index = 0; index < 10; index++) {
      sessions.set(`k${index}`, { sessionId: `ses_${index}`, tenant: index % 2 === 0 ? 'acme' : 'beta' })
    }
    // Reorder the recency list so that deleted entries sit at both ends and in the middle.
    for (const index of [0, 5, 2, 9, 4]) sessions.get(`k${index}`)
    expect(sessions.clear('acme')).toBe(5)
    expect(sessions.countByTenant()).toEqual({ beta: 5 })
    for (let index = 1; index < 10; index += 2) expect(entryAt(sessions, `k${index}`)?.tenant).toBe('beta')
  })

  it('clear() without a tenant drops every entry and returns how many went', () => {
    const sessions = store()
    sessions.set('a1', { sessionId: 'ses_a1', tenant: 'acme' })
    sessions.set('b1', { sessionId: 'ses_b1', tenant: 'beta' })
    expect(sessions.clear()).toBe(2)
    expect(sessions.size).toBe(0)
  })

  it('clear(tenant) of a tenant without entries returns 0 and keeps the others', () => {
    const sessions = store()
    sessions.set('a1', { sessionId: 'ses_a1', tenant: 'acme' })
    expect(sessions.clear('nobody')).toBe(0)
    expect(sessions.size).toBe(1)
  })

  it('countByTenant counts the entries of each tenant', () => {
    const sessions = store()
    sessions.set('a1', { sessionId: 'ses_a1', tenant: 'acme' })
    sessions.set('a2', { sessionId: 'ses_a2', tenant: 'acme' })
    sessions.set('b1', { sessionId: 'ses_b1', tenant: 'beta' })
    expect(sessions.countByTenant()).toEqual({ acme: 2, beta: 1 })
  })

  it('countByTenant is empty for an empty store', () => {
    expect(store().countByTenant()).toEqual({})
  })

  it('countByTenant leaves out expired entries', () => {
    const sessions = store(100, 40)
    sessions.set('a1', { sessionId: 'ses_a1', tenant: 'acme' })
    advance(70)
    expect(sessions.countByTenant()).toEqual({})
  })
})
