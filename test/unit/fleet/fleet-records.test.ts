import { afterEach, describe, expect, it } from 'vitest'
import { FleetRecords } from '../../../src/fleet/fleet-records.js'
import { createSharedStore } from '../../../src/store/shared-store.js'
import { useRedisServer } from '../../helpers/redis-server.js'
import { ownedByTest } from '../../helpers/teardown.js'

/**
 * SPEC 12-14's shared records (brownout pauses, stage overrides) between replicas on one real
 * redis-server, each with its own connection. No refresh runs on a timer here (an hour apart):
 * a replica's copy is exactly as old as the test makes it.
 */
const QUIET = { info: () => undefined, warn: () => undefined }
const HOUR = 3_600_000
const redis = useRedisServer()
let prefixes = 0
const started: Array<FleetRecords<Rec>> = []

interface Rec {
  readonly until: string
  readonly value: string
}

afterEach(() => {
  for (const records of started.splice(0)) records.stop()
})

function record(value: string): Rec {
  return { until: new Date(Date.now() + HOUR).toISOString(), value }
}

/** One replica: its own connection, its copy loaded once at its start. */
async function replica(prefix: string): Promise<FleetRecords<Rec>> {
  const store = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: prefix, logger: QUIET }), (shared) => shared.close())
  const records = new FleetRecords<Rec>({ store, family: 'test', logger: QUIET, refreshMs: HOUR })
  started.push(records)
  await records.start()
  return records
}

/** What the store holds under `key`, decoded. */
async function stored(prefix: string, key: string): Promise<{ v: Rec | null; at: number } | null> {
  const raw = await redis.client().hget(`${prefix}f:test`, key)
  return raw === null ? null : (JSON.parse(raw) as { v: Rec | null; at: number })
}

describe('FleetRecords between replicas (real redis-server)', () => {
  it('removes a record another replica set after this one last refreshed its copy', async () => {
    const prefix = `fr${++prefixes}:`
    const [a, b] = [await replica(prefix), await replica(prefix)]
    const paused = record('set on a')
    expect(await a.set('k', paused)).toBe('fleet')
    // b's copy predates the set: the removal reads the store before it decides.
    expect(await b.remove('k', Date.now())).toEqual({ removed: paused, scope: 'fleet' })
    expect((await stored(prefix, 'k'))?.v).toBeNull()
    await a.refresh()
    expect(a.get('k', Date.now())).toBeUndefined()
  })

  it('removes a record written by a replica whose clock runs ahead of this one', async () => {
    const prefix = `fr${++prefixes}:`
    const ahead = record('written a minute ahead')
    await redis.client().hset(`${prefix}f:test`, 'k', JSON.stringify({ v: ahead, at: Date.now() + 60_000, until: Date.parse(ahead.until) }))
    const b = await replica(prefix)
    expect(b.get('k', Date.now())).toEqual(ahead)
    expect(await b.remove('k', Date.now())).toEqual({ removed: ahead, scope: 'fleet' })
    // The tombstone is later than the record it removes, so the store took it.
    expect((await stored(prefix, 'k'))?.v).toBeNull()
    const c = await replica(prefix)
    expect(c.get('k', Date.now())).toBeUndefined()
  })

  it('replaces a record written by a replica whose clock runs ahead of this one', async () => {
    const prefix = `fr${++prefixes}:`
    const ahead = record('written a minute ahead')
    await redis.client().hset(`${prefix}f:test`, 'k', JSON.stringify({ v: ahead, at: Date.now() + 60_000, until: Date.parse(ahead.until) }))
    const b = await replica(prefix)
    const replacement = record('set on b')
    expect(await b.set('k', replacement)).toBe('fleet')
    expect((await stored(prefix, 'k'))?.v).toEqual(replacement)
  })

  it('takes at once the later record of the store when the store refuses a change', async () => {
    const prefix = `fr${++prefixes}:`
    const b = await replica(prefix)
    // Written after b's copy was loaded, by a replica far ahead: b's change is earlier than it.
    const later = record('later, elsewhere')
    await redis.client().hset(`${prefix}f:test`, 'k', JSON.stringify({ v: later, at: Date.now() + HOUR, until: Date.parse(later.until) }))
    await b.set('k', record('set on b'))
    expect((await stored(prefix, 'k'))?.v).toEqual(later)
    expect(b.get('k', Date.now())).toEqual(later)
  })
})
