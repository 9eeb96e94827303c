import type { RedisConnection } from '../store/redis-connection.js'
import { dayName, dayOf, DAY_MS, DAYS_KEPT, type RegistryBounds, type RegistryData } from './registry-data.js'
import { distinctClientCount, firstListedDay, type ClientView, type RouteView, type TenantView } from './registry-view.js'

/**
 * SPEC 12's client registry in Redis: its own key family, `<keyPrefix>r:` (tenant names hold no
 * `:`, and the route comes last, so no key of one route can be another's):
 *
 *   r:since                 when the store's registry data begins (the first write; SET NX)
 *   r:hashes                ZSET config hash -> when a replica last wrote with it
 *   r:T:share               HASH "<day>:l" / "<day>:n" -> legacy / native requests that UTC day
 *   r:T:m:ROUTE             HASH requests, lastSeen, lastSeenNonExempt, evicted, listed (ids ever added to z:, -1 unknown)
 *   r:T:d:ROUTE             HASH <day> -> requests
 *   r:T:c:ROUTE             HASH client id -> {u, n, f, l, b} (user agent, requests, first/last seen, last brownout)
 *   r:T:z:ROUTE             ZSET client id -> last seen (most recent first; least recent evicted)
 *   r:T:h:ROUTE             HyperLogLog of the route's client ids
 *   r:T:h<day>:ROUTE        HyperLogLog of the client ids of one UTC day
 *
 * Days are epoch day numbers. Every key but `m:` gets a TTL of the tenant's `retentionDays` at each
 * write (the per-day logs 31 days), and each write trims clients last seen before the retention.
 * `m:` holds what `sunset-check` decides on (lastSeenNonExempt): it has no TTL, so that a Redis full
 * of sessions under a `volatile-*` policy (the shipped one) never evicts that evidence of a quiet
 * route while `r:since` stays and vouches for it (docs/decisions.md). It is a few fields per route.
 */
export function registryKeys(prefix: string) {
  const base = `${prefix}r:`
  return {
    since: `${base}since`,
    hashes: `${base}hashes`,
    share: (tenant: string) => `${base}${tenant}:share`,
    route: (tenant: string, route: string) => ({
      main: `${base}${tenant}:m:${route}`,
      days: `${base}${tenant}:d:${route}`,
      clients: `${base}${tenant}:c:${route}`,
      recent: `${base}${tenant}:z:${route}`,
      distinct: `${base}${tenant}:h:${route}`,
      distinctOn: (day: number) => `${base}${tenant}:h${day}:${route}`
    })
  }
}

/**
 * Adds one route's delta (ARGV[1], JSON) to what the store holds, in one step: counts summed, last
 * seen the later, a client's user agent the one of its later request; then the clients older than
 * the retention (ARGV[3]) go, then the least recently seen beyond `maxPerRoute` (ARGV[2]), counted
 * in `evicted`; days before ARGV[4] go. The delta's own evictions (`ev`, ids in `x`) count only for
 * clients the store does not list. A route last seen before the retention starts over (its main
 * hash and distinct log go first). KEYS: main, days, clients, recent, distinct.
 */
const ADD_ROUTE = `local p = cjson.decode(ARGV[1])
local maxPer = tonumber(ARGV[2])
local cutoff = tonumber(ARGV[3])
local firstDay = tonumber(ARGV[4])
local ttl = tonumber(ARGV[5])
local function later(key, field, value)
  if value > 0 and value > tonumber(redis.call('HGET', key, field) or '0') then redis.call('HSET', key, field, string.format('%d', value)) end
end
-- No TTL on main (sunset evidence): a route unused for the whole retention starts over, as in memory.
if tonumber(redis.call('HGET', KEYS[1], 'lastSeen') or '0') < cutoff then redis.call('DEL', KEYS[1], KEYS[5]) end
-- Ids ever added to the client list: an upper bound of the distinct clients that no eviction of
-- the list's keys lowers. Known only when counted from the route's first write (-1: a route older
-- than the count).
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('HSET', KEYS[1], 'listed', '0')
elseif redis.call('HEXISTS', KEYS[1], 'listed') == 0 then redis.call('HSET', KEYS[1], 'listed', '-1') end
local counting = tonumber(redis.call('HGET', KEYS[1], 'listed')) >= 0
local added = 0
redis.call('HINCRBY', KEYS[1], 'requests', p.n)
later(KEYS[1], 'lastSeen', p.l)
later(KEYS[1], 'lastSeenNonExempt', p.e)
-- The delta's evictions, but for clients the store lists or the delta holds again: merged, those
-- are still listed (an eviction below, past maxPerRoute, counts them if they go).
local ev = p.ev
if ev > 0 then
  local held = {}
  for _, c in ipairs(p.c) do held[c[1]] = true end
  for _, id in ipairs(p.x) do
    if held[id] or redis.call('ZSCORE', KEYS[4], id) then ev = ev - 1 end
  end
  if ev > 0 then redis.call('HINCRBY', KEYS[1], 'evicted', ev) end
end
-- Records are found, trimmed and listed through the list: with the list evicted (volatile-lru
-- takes keys one at a time) those left would never be trimmed again, ids and user agents kept
-- past the retention and maxPerRoute.
if redis.call('EXISTS', KEYS[4]) == 0 then redis.call('DEL', KEYS[3]) end
for _, d in ipairs(p.d) do redis.call('HINCRBY', KEYS[2], tostring(d[1]), d[2]) end
for _, day in ipairs(redis.call('HKEYS', KEYS[2])) do
  if tonumber(day) < firstDay then redis.call('HDEL', KEYS[2], day) end
end
for _, c in ipairs(p.c) do
  local id = c[1]
  local current = redis.call('HGET', KEYS[3], id)
  local r
  if current then
    r = cjson.decode(current)
    r.n = r.n + c[3]
    if c[4] < r.f then r.f = c[4] end
    if c[5] >= r.l then r.l = c[5]; r.u = c[2] end
    if c[6] > r.b then r.b = c[6] end
  else
    r = { u = c[2], n = c[3], f = c[4], l = c[5], b = c[6] }
  end
  redis.call('HSET', KEYS[3], id, cjson.encode(r))
  added = added + redis.call('ZADD', KEYS[4], r.l, id)
end
if counting and added > 0 then redis.call('HINCRBY', KEYS[1], 'listed', added) end
local function drop(ids)
  for i = 1, #ids, 1000 do
    local chunk = { unpack(ids, i, math.min(i + 999, #ids)) }
    redis.call('ZREM', KEYS[4], unpack(chunk))
    redis.call('HDEL', KEYS[3], unpack(chunk))
  end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. string.format('%d', cutoff)))
local over = redis.call('ZCARD', KEYS[4]) - maxPer
if over > 0 then
  drop(redis.call('ZRANGE', KEYS[4], 0, over - 1))
  redis.call('HINCRBY', KEYS[1], 'evicted', over)
end
redis.call('PERSIST', KEYS[1])
for i = 2, 4 do redis.call('EXPIRE', KEYS[i], ttl) end
return 1`

/** Adds a tenant's per-day legacy and native counts (ARGV[1], JSON) and drops days before ARGV[2]. KEYS: share. */
const ADD_SHARE = `local p = cjson.decode(ARGV[1])
for _, d in ipairs(p) do
  if d[2] > 0 then redis.call('HINCRBY', KEYS[1], d[1] .. ':l', d[2]) end
  if d[3] > 0 then redis.call('HINCRBY', KEYS[1], d[1] .. ':n', d[3]) end
end
local firstDay = tonumber(ARGV[2])
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if tonumber(string.match(field, '^(%d+)')) < firstDay then redis.call('HDEL', KEYS[1], field) end
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1`

/** How long a replica's config hash counts as one of the fleet's after its last write. */
const HASH_FRESH_MS = 60_000

function ttlSeconds(retentionDays: number): number {
  return Math.max(1, Math.ceil((retentionDays * DAY_MS) / 1_000))
}

/**
 * Writes a delta, or one part of a large one (RegistryData.parts), to the store in one pipeline
 * (SPEC 12: "written in one pipeline at most every `store.flushMs`"). A pipeline's commands each
 * succeed or fail on their own: what the store refused, a tenant's share or a route's script
 * (its distinct logs are unions: sent again, they count nothing twice), comes back as a delta to
 * keep for the next write (`delta` itself when it took nothing), or undefined when it took
 * everything. Rejects when the pipeline was
 * not run at all (the connection broke): then nothing is known to be written, and the caller
 * keeps the whole part, so a part that half-applied may count twice.
 */
export async function writeDelta(connection: RedisConnection, prefix: string, delta: RegistryData, bounds: RegistryBounds, configHash: string, nowMs: number): Promise<RegistryData | undefined> {
  const keys = registryKeys(prefix)
  const firstDay = dayOf(nowMs) - DAYS_KEPT + 1
  // The pipeline index of each counting script (the pipeline's length as it is queued), and what it carried.
  const scripts: Array<{ at: number; tenant: string; route: string | undefined }> = []
  const results = await connection.run((client) => {
    const pipeline = client.pipeline()
    pipeline.zadd(keys.hashes, nowMs, configHash)
    pipeline.zremrangebyscore(keys.hashes, '-inf', `(${nowMs - HASH_FRESH_MS}`)
    // The store's first write: from then on every replica's counts are in it.
    pipeline.set(keys.since, String(delta.startMs), 'NX')
    for (const [tenant, data] of delta.tenants) {
      const { maxPerRoute, retentionDays } = bounds.forTenant(tenant)
      const ttl = ttlSeconds(retentionDays)
      const cutoffMs = nowMs - retentionDays * DAY_MS
      if (data.share.size > 0) {
        const share = [...data.share].map(([day, counts]) => [day, counts.legacy, counts.native])
        scripts.push({ at: pipeline.length, tenant, route: undefined })
        pipeline.eval(ADD_SHARE, 1, keys.share(tenant), JSON.stringify(share), String(firstDay), String(ttl))
      }
      for (const [label, route] of data.routes) {
        const routeKeys = keys.route(tenant, label)
        const clients = [...route.clients.values()]
        const payload = {
          n: route.requests,
          l: route.lastSeenMs,
          e: route.lastSeenNonExemptMs,
          ev: route.clientsEvicted,
          x: route.departed === undefined ? [] : [...route.departed.keys()],
          d: [...route.days].map(([day, count]) => [day, count.requests]),
          c: clients.map((client) => [client.id, client.userAgent ?? '', client.requests, client.firstSeenMs, client.lastSeenMs, client.lastBrownoutMs])
        }
        scripts.push({ at: pipeline.length, tenant, route: label })
        pipeline.eval(ADD_ROUTE, 5, routeKeys.main, routeKeys.days, routeKeys.clients, routeKeys.recent, routeKeys.distinct, JSON.stringify(payload), String(maxPerRoute), String(cutoffMs), String(firstDay), String(ttl))
        // Distinct sets merge as HyperLogLog unions: each id of the delta added to its route's and
        // day's logs, those of the clients evicted from the delta before this write included.
        const seen: Array<[string, Iterable<number>]> = clients.map((client) => [client.id, new Set([...(client.days ?? []), dayOf(client.lastSeenMs)])])
        if (route.departed !== undefined) for (const entry of route.departed) seen.push(entry)
        if (seen.length === 0) continue
        addAll(pipeline, routeKeys.distinct, seen.map(([id]) => id))
        pipeline.expire(routeKeys.distinct, ttl)
        const byDay = new Map<number, string[]>()
        for (const [id, days] of seen) {
          for (const day of days) {
            if (day < firstDay) continue
            let ids = byDay.get(day)
            if (ids === undefined) byDay.set(day, (ids = []))
            ids.push(id)
          }
        }
        for (const [day, ids] of byDay) {
          addAll(pipeline, routeKeys.distinctOn(day), ids)
          pipeline.expire(routeKeys.distinctOn(day), Math.ceil(((DAYS_KEPT + 1) * DAY_MS) / 1_000))
        }
      }
    }
    return pipeline.exec()
  })
  if (results === null) throw new Error('the registry pipeline was not run')
  const refused = scripts.filter(({ at }) => results[at]?.[0] != null)
  // All refused: the delta itself, so that the caller can tell nothing was taken.
  return refused.length === 0 ? undefined : refused.length === scripts.length ? delta : delta.only(refused)
}

/** Ids per PFADD: a spread of a whole outage's ids into one call could pass the engine's argument limit. */
const IDS_PER_ADD = 10_000

function addAll(pipeline: { pfadd(key: string, ...ids: string[]): unknown }, key: string, ids: readonly string[]): void {
  for (let at = 0; at < ids.length; at += IDS_PER_ADD) pipeline.pfadd(key, ...ids.slice(at, at + IDS_PER_ADD))
}

export interface FleetRead {
  sinceMs: number | null
  configHashes: string[]
  tenants: Map<string, TenantView>
}

/** The fleet's registry for `routesOf` tenants, in two round trips (SPEC 12's answer). */
export async function readFleet(connection: RedisConnection, prefix: string, routesOf: ReadonlyMap<string, readonly string[]>, clientsPerRoute: number, nowMs: number, retentionDaysOf: (tenant: string) => number): Promise<FleetRead> {
  const keys = registryKeys(prefix)
  const firstDay = firstListedDay(nowMs)
  const plan = [...routesOf].map(([tenant, routes]) => ({ tenant, routes: routes.map((label) => ({ label, keys: keys.route(tenant, label) })) }))
  const first = await connection.run((client) => {
    const pipeline = client.pipeline()
    pipeline.get(keys.since)
    pipeline.zrangebyscore(keys.hashes, nowMs - HASH_FRESH_MS, '+inf')
    for (const { tenant, routes } of plan) {
      pipeline.hgetall(keys.share(tenant))
      for (const { keys: routeKeys } of routes) {
        pipeline.hgetall(routeKeys.main)
        pipeline.hgetall(routeKeys.days)
        pipeline.pfcount(routeKeys.distinct)
        pipeline.zcard(routeKeys.recent)
        // ZREVRANGE's stop -1 would mean every client: `?clients=0` asks for none.
        if (clientsPerRoute > 0) pipeline.zrevrange(routeKeys.recent, 0, clientsPerRoute - 1)
      }
    }
    return pipeline.exec()
  })
  const answers = unwrap(first)
  let at = 0
  const sinceRaw = answers[at++] as string | null
  const configHashes = answers[at++] as string[]
  const partial = plan.map(({ tenant, routes }) => {
    const share = answers[at++] as Record<string, string>
    return {
      tenant,
      share,
      routes: routes.map((route) => ({
        ...route,
        main: answers[at++] as Record<string, string>,
        days: answers[at++] as Record<string, string>,
        distinct: answers[at++] as number,
        held: answers[at++] as number,
        recent: clientsPerRoute > 0 ? (answers[at++] as string[]) : []
      }))
    }
  })
  const second = await connection.run((client) => {
    const pipeline = client.pipeline()
    for (const { routes } of partial) {
      for (const route of routes) {
        for (const day of listedDays(route.days, firstDay)) pipeline.pfcount(route.keys.distinctOn(day))
        if (route.recent.length > 0) pipeline.hmget(route.keys.clients, ...route.recent)
      }
    }
    return pipeline.exec()
  })
  const more = unwrap(second)
  at = 0
  const tenants = new Map<string, TenantView>()
  for (const { tenant, share, routes } of partial) {
    const views = new Map<string, RouteView>()
    const cutoffMs = nowMs - retentionDaysOf(tenant) * DAY_MS
    for (const route of routes) {
      // `m:` has no TTL: a route unused for the whole retention reads as unused, as the memory
      // registry's sweep forgets it (the script starts it over at its next write).
      if (Number(route.main.lastSeen ?? 0) < cutoffMs) route.main = {}
      const days = listedDays(route.days, firstDay).map((day) => ({ day: dayName(day), requests: Number(route.days[String(day)]), clients: more[at++] as number }))
      const stored = route.recent.length > 0 ? (more[at++] as (string | null)[]) : []
      const clients: ClientView[] = []
      route.recent.forEach((id, index) => {
        const raw = stored[index]
        if (raw === null || raw === undefined) return
        const record = JSON.parse(raw) as { u: string; n: number; f: number; l: number; b: number }
        clients.push({ clientId: id, userAgent: record.u === '' ? null : record.u, requests: record.n, firstSeenMs: record.f, lastSeenMs: record.l, lastBrownoutMs: record.b > 0 ? record.b : null })
      })
      const numberOr = (value: string | undefined): number | null => (value === undefined ? null : Number(value))
      views.set(route.label, {
        requests: Number(route.main.requests ?? 0),
        lastSeenMs: numberOr(route.main.lastSeen),
        lastSeenNonExemptMs: numberOr(route.main.lastSeenNonExempt),
        distinctClients: distinctClientsInStore(route.distinct, route.held, route.main),
        clientsEvicted: Number(route.main.evicted ?? 0),
        days,
        clients
      })
    }
    tenants.set(tenant, { share: shareDays(share, firstDay), routes: views })
  }
  return { sinceMs: sinceRaw === null ? null : Number(sinceRaw), configHashes, tenants }
}

/**
 * SPEC 12's `distinctClients` from the store: PFCOUNT held to what is certain, as in memory
 * (registry-view.ts). At least the clients listed now; at most every id ever added to the list
 * (`listed`, in the summary that has no TTL, so an eviction of the list under memory pressure
 * lowers nothing) and the delta evictions that never reached it (within `evicted`). A route
 * written before `listed` was counted has no upper bound: the estimate, at least the list.
 */
function distinctClientsInStore(estimate: number, held: number, main: Record<string, string>): number {
  const listed = main.listed === undefined ? -1 : Number(main.listed)
  if (listed < 0) return Math.max(estimate, held)
  return distinctClientCount(estimate, held, Math.max(0, listed + Number(main.evicted ?? 0) - held))
}

function unwrap(results: [Error | null, unknown][] | null): unknown[] {
  if (results === null) throw new Error('the registry read was not run')
  return results.map(([error, value]) => {
    if (error !== null) throw error
    return value
  })
}

function listedDays(days: Record<string, string>, firstDay: number): number[] {
  return Object.keys(days)
    .map(Number)
    .filter((day) => day >= firstDay)
    .sort((a, b) => a - b)
}

function shareDays(fields: Record<string, string>, firstDay: number): { day: string; legacy: number; native: number }[] {
  const byDay = new Map<number, { legacy: number; native: number }>()
  for (const [field, value] of Object.entries(fields)) {
    const [day, kind] = field.split(':')
    const number = Number(day)
    if (number < firstDay) continue
    let counts = byDay.get(number)
    if (counts === undefined) byDay.set(number, (counts = { legacy: 0, native: 0 }))
    if (kind === 'l') counts.legacy += Number(value)
    else counts.native += Number(value)
  }
  return [...byDay]
    .sort(([a], [b]) => a - b)
    .map(([day, counts]) => ({ day: dayName(day), ...counts }))
}
