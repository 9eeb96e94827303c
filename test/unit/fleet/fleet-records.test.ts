import { afterEach, describe, expect, it } from 'vitest'
import { FleetRecords } from '../../../src/fleet/fleet-records.js'
import { createSharedStore, memorySharedStore } from '../../../src/store/shared-store.js'
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

/** Writes `value` under `key` as a replica whose clock runs `aheadMs` ahead would. */
async function writtenAhead(prefix: string, key: string, value: Rec, aheadMs: number): Promise<void> {
  await redis.client().hset(`${prefix}f:test`, key, JSON.stringify({ v: value, at: Date.now() + aheadMs, until: Date.parse(value.until) }))
}

/** A replica started after a record under `k` was written by one whose clock runs a minute ahead. */
async function afterWriteAhead(): Promise<{ prefix: string; ahead: Rec; b: FleetRecords<Rec> }> {
  const prefix = `fr${++prefixes}:`
  const ahead = record('written a minute ahead')
  await writtenAhead(prefix, 'k', ahead, 60_000)
  return { prefix, ahead, b: await replica(prefix) }
}

/**
 * A replica (not started: no refresh but the test's) whose next call to the store, once armed, is
 * followed by `write`, another replica's write, before the call's answer reaches it.
 */
async function wrappedReplica(prefix: string): Promise<{ records: FleetRecords<Rec>; writeAfterNextCall(write: () => Promise<void>): void }> {
  const store = await ownedByTest('sharedStore', () => createSharedStore({ kind: 'redis', url: redis.url, keyPrefix: prefix, logger: QUIET }), (shared) => shared.close())
  const connection = store.connection as NonNullable<typeof store.connection>
  const run = connection.run.bind(connection)
  let pending: (() => Promise<void>) | undefined
  connection.run = (async (work: Parameters<typeof run>[0]) => {
    const result = await run(work)
    const write = pending
    pending = undefined
    if (write !== undefined) await write()
    return result
  }) as typeof connection.run
  return {
    records: new FleetRecords<Rec>({ store, family: 'test', logger: QUIET, refreshMs: HOUR }),
    writeAfterNextCall: (write) => {
      pending = write
    }
  }
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
    const { prefix, ahead, b } = await afterWriteAhead()
    expect(b.get('k', Date.now())).toEqual(ahead)
    expect(await b.remove('k', Date.now())).toEqual({ removed: ahead, scope: 'fleet' })
    // The tombstone is later than the record it removes, so the store took it.
    expect((await stored(prefix, 'k'))?.v).toBeNull()
    const c = await replica(prefix)
    expect(c.get('k', Date.now())).toBeUndefined()
  })

  it('writes its changes of other keys by its own clock after it took a record from a clock ahead', async () => {
    const { prefix, b } = await afterWriteAhead()
    // Its removal of that record is later than it; a change of another key after it is not moved so.
    await b.remove('k', Date.now())
    await b.set('other', record('set on b'))
    expect((await stored(prefix, 'other'))?.at).toBeLessThan(Date.now() + 1_000)
  })

  it('replaces a record written by a replica whose clock runs ahead of this one', async () => {
    const { prefix, b } = await afterWriteAhead()
    const replacement = record('set on b')
    expect(await b.set('k', replacement)).toBe('fleet')
    expect((await stored(prefix, 'k'))?.v).toEqual(replacement)
  })

  // Only in these two is the store's call wrapped: no socket can place another replica's write
  // between a replica's read of the store and its write.
  it('drops an ended record from the store, but not one another replica wrote in its place since the read', async () => {
    const prefix = `fr${++prefixes}:`
    const ended = { v: record('ended'), at: Date.now() - 2 * HOUR, until: Date.now() - HOUR }
    await redis.client().hset(`${prefix}f:test`, 'gone', JSON.stringify(ended), 'rewritten', JSON.stringify(ended))
    const fresh = record('written since the read')
    const { records, writeAfterNextCall } = await wrappedReplica(prefix)
    writeAfterNextCall(() => writtenAhead(prefix, 'rewritten', fresh, 0))
    await records.refresh()
    expect(await stored(prefix, 'gone')).toBeNull()
    expect((await stored(prefix, 'rewritten'))?.v).toEqual(fresh)
  })

  it('takes at once the later record of the store when the store refuses a change', async () => {
    const prefix = `fr${++prefixes}:`
    const { records, writeAfterNextCall } = await wrappedReplica(prefix)
    // Written right after the change read the store, by a replica far ahead: the change is earlier.
    const later = record('later, elsewhere')
    writeAfterNextCall(() => writtenAhead(prefix, 'k', later, HOUR))
    await records.set('k', record('set on b'))
    expect((await stored(prefix, 'k'))?.v).toEqual(later)
    expect(records.get('k', Date.now())).toEqual(later)
  })
})

describe('shared records with store memory (one process)', () => {
  it('holds nothing once its records are removed or have ended, so the request path skips its lookups again', async () => {
    const records = new FleetRecords<Rec>({ store: memorySharedStore(), family: 'test', logger: QUIET })
    await records.start()
    expect(await records.set('removed', record('a'))).toBe('replica')
    expect((await records.remove('removed', Date.now())).removed?.value).toBe('a')
    // No tombstone: no other replica holds a copy to bring it back.
    expect(records.size).toBe(0)

    const now = Date.now()
    await records.set('ending', { until: new Date(now + 1_000).toISOString(), value: 'b' })
    expect(records.entries(now).map(([key]) => key)).toEqual(['ending'])
    expect(records.size).toBe(1)
    // Listed once it has ended (the gauges list at every scrape): gone.
    expect(records.entries(now + 1_000)).toEqual([])
    expect(records.size).toBe(0)
  })
})
