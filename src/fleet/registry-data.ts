import { HyperLogLog } from './hyperloglog.js'

/** SPEC 12: a user agent is kept to at most 256 characters. */
export const MAX_USER_AGENT_CHARS = 256
/** SPEC 12: per route, the requests and distinct clients of the last 30 UTC days. */
export const DAYS_KEPT = 30
export const DAY_MS = 86_400_000

/** The bounds of SPEC 12 as the registry applies them; read per request, so a reload applies at once. */
export interface RegistryBounds {
  /** `clients.maxTotal`: client records of this replica, every tenant and route together. */
  readonly maxTotal: number
  /** `tenants.T.clients.maxPerRoute` and `retentionDays`; a tenant not listed gets the defaults. */
  forTenant(tenant: string): { readonly maxPerRoute: number; readonly retentionDays: number }
}

/** One legacy request as the registry records it (no credential: the client id is SPEC 12's). */
export interface LegacySample {
  tenant: string
  route: string
  clientId: string
  userAgent: string | undefined
  /** The client had an exemption in force (SPEC 13) when it called. */
  exempt: boolean
  /** The answer was SPEC 13's brownout. */
  brownout: boolean
  atMs: number
}

export class ClientRecord {
  /** UTC days (epoch day numbers) this record saw besides its last one; only while a delta is kept for the store. */
  days: number[] | undefined = undefined
  constructor(
    readonly id: string,
    public userAgent: string | null,
    public requests: number,
    public firstSeenMs: number,
    public lastSeenMs: number,
    public lastBrownoutMs: number
  ) {}
}

export interface DayCount {
  requests: number
  readonly clients: HyperLogLog
}

export class RouteData {
  requests = 0
  lastSeenMs = 0
  lastSeenNonExemptMs = 0
  clientsEvicted = 0
  /** Clients the retention took away (`sweep`): with `clientsEvicted`, every id the route stopped listing. */
  clientsSwept = 0
  readonly distinct = new HyperLogLog()
  readonly days = new Map<number, DayCount>()
  /** By last seen, least recent first: a Map keeps insertion order, and each request moves its client to the end. */
  readonly clients = new Map<string, ClientRecord>()
  /** The client of the route's last request and that request's day: the same client again costs no reordering and no HyperLogLog update. */
  /**
   * A delta's clients evicted before it was written (a burst or an outage past `maxPerRoute` or
   * `maxTotal`), by id, with the UTC days each was seen: gone from the listing, but their ids
   * still go into the store's route and day distinct logs.
   */
  departed: Map<string, number[]> | undefined = undefined
  lastClient: ClientRecord | undefined = undefined
  lastDay: DayCount | undefined = undefined
  lastDayNumber = -1
}

export interface TenantData {
  readonly routes: Map<string, RouteData>
  /** Per UTC day: legacy and native requests (SPEC 12's legacy share). */
  readonly share: Map<number, { legacy: number; native: number }>
}

/** The first `count` UTF-16 units of `text`, without half a surrogate pair at the cut. */
function firstChars(text: string, count: number): string {
  const code = text.charCodeAt(count - 1)
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? count - 1 : count)
}

export function dayOf(ms: number): number {
  return Math.floor(ms / DAY_MS)
}

export function dayName(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10)
}

/**
 * The registry's counts in memory (SPEC 12): the whole of it with `store: memory`, and with Redis
 * the delta a replica has not written yet (its own counts since the last flush, or since an outage
 * began). Bounded by `maxPerRoute` and `maxTotal` (the client seen least recently goes, counted in
 * `clientsEvicted`) and by the retention (`sweep`). Recording is a few Map operations, no I/O.
 */
export class RegistryData {
  readonly tenants = new Map<string, TenantData>()
  #clientCount = 0
  /** Ids in RouteData.departed, all routes: at most `maxTotal` (a client evicted again is held once). */
  #departedCount = 0

  /** `trackDays`: remember every day a client was seen (a delta written to the store needs them for its per-day distinct sets). */
  constructor(
    /** From when the counts are complete (SPEC 12's `since` of a `replica` or `local` answer). */
    public startMs: number,
    private readonly bounds: RegistryBounds,
    private readonly trackDays = false
  ) {}

  get clientCount(): number {
    return this.#clientCount
  }

  isEmpty(): boolean {
    return this.tenants.size === 0
  }

  /**
   * What is counted here: the legacy routes' requests (SPEC 12's sunset evidence), and the legacy
   * share's legacy and native requests. A delta the store took in part may hold either without
   * the other (its share written, a route refused, or the reverse).
   */
  requestTotals(): { routes: number; shareLegacy: number; shareNative: number } {
    let routes = 0
    let shareLegacy = 0
    let shareNative = 0
    for (const tenant of this.tenants.values()) {
      for (const route of tenant.routes.values()) routes += route.requests
      for (const counts of tenant.share.values()) {
        shareLegacy += counts.legacy
        shareNative += counts.native
      }
    }
    return { routes, shareLegacy, shareNative }
  }

  tenant(name: string): TenantData {
    let tenant = this.tenants.get(name)
    if (tenant === undefined) this.tenants.set(name, (tenant = { routes: new Map(), share: new Map() }))
    return tenant
  }

  recordNative(tenant: string, atMs: number): void {
    this.#share(this.tenant(tenant), dayOf(atMs)).native++
  }

  recordLegacy(sample: LegacySample): void {
    const tenant = this.tenant(sample.tenant)
    const day = dayOf(sample.atMs)
    this.#share(tenant, day).legacy++
    let route = tenant.routes.get(sample.route)
    if (route === undefined) tenant.routes.set(sample.route, (route = new RouteData()))
    route.requests++
    if (sample.atMs > route.lastSeenMs) route.lastSeenMs = sample.atMs
    if (!sample.exempt && sample.atMs > route.lastSeenNonExemptMs) route.lastSeenNonExemptMs = sample.atMs
    const userAgent = sample.userAgent === undefined ? null : sample.userAgent.length > MAX_USER_AGENT_CHARS ? firstChars(sample.userAgent, MAX_USER_AGENT_CHARS) : sample.userAgent
    const last = route.lastClient
    if (last !== undefined && last.id === sample.clientId && route.lastDayNumber === day && route.clients.get(last.id) === last) {
      // The same client as the route's last request, the same day: it is already last in the
      // order and in both distinct logs (the common case of a busy client).
      ;(route.lastDay as DayCount).requests++
      this.#touch(last, sample, userAgent, day)
      return
    }
    route.distinct.add(sample.clientId)
    let dayCount = route.days.get(day)
    if (dayCount === undefined) {
      route.days.set(day, (dayCount = { requests: 0, clients: new HyperLogLog() }))
      // A new day: the one that fell out of the 30 goes.
      for (const old of route.days.keys()) if (old <= day - DAYS_KEPT) route.days.delete(old)
    }
    dayCount.requests++
    dayCount.clients.add(sample.clientId)
    route.lastDay = dayCount
    route.lastDayNumber = day

    const client = route.clients.get(sample.clientId)
    if (client !== undefined) {
      route.clients.delete(sample.clientId)
      route.clients.set(sample.clientId, client)
      route.lastClient = client
      this.#touch(client, sample, userAgent, day)
      return
    }
    // Room for one more, least recent first: one eviction, or more where a reload lowered a bound
    // (or `absorb` merged a delta) past what is kept.
    const { maxPerRoute } = this.bounds.forTenant(sample.tenant)
    while (route.clients.size >= maxPerRoute && route.clients.size > 0) this.#evictLeastRecent(route)
    this.#evictDownTo(this.bounds.maxTotal - 1)
    if (route.clients.size >= maxPerRoute || this.#clientCount >= this.bounds.maxTotal) {
      // Nothing could be evicted (a bound of 0): counted, not kept.
      route.clientsEvicted++
      return
    }
    const added = new ClientRecord(sample.clientId, userAgent, 1, sample.atMs, sample.atMs, sample.brownout ? sample.atMs : 0)
    route.clients.set(sample.clientId, added)
    route.lastClient = added
    this.#clientCount++
  }

  // Samples are recorded as requests finish but carry their arrival: a long one arrives before
  // requests recorded ahead of it, so each field keeps its own earliest or latest.
  #touch(client: ClientRecord, sample: LegacySample, userAgent: string | null, day: number): void {
    client.requests++
    if (sample.atMs >= client.lastSeenMs) {
      if (this.trackDays && dayOf(client.lastSeenMs) !== day) (client.days ??= []).push(dayOf(client.lastSeenMs))
      client.lastSeenMs = sample.atMs
      // The same text as before keeps the stored string (no copy per request).
      if (client.userAgent !== userAgent) client.userAgent = userAgent
    } else {
      if (sample.atMs < client.firstSeenMs) client.firstSeenMs = sample.atMs
      if (this.trackDays && dayOf(client.lastSeenMs) !== day && client.days?.includes(day) !== true) (client.days ??= []).push(day)
    }
    if (sample.brownout && sample.atMs > client.lastBrownoutMs) client.lastBrownoutMs = sample.atMs
  }

  /** Forgets what is older than each tenant's `retentionDays`: clients last seen before, and routes unused since. */
  sweep(nowMs: number): void {
    for (const [name, tenant] of this.tenants) {
      const cutoffMs = nowMs - this.bounds.forTenant(name).retentionDays * DAY_MS
      const firstDay = dayOf(nowMs) - DAYS_KEPT + 1
      for (const day of tenant.share.keys()) if (day < firstDay) tenant.share.delete(day)
      for (const [label, route] of tenant.routes) {
        if (route.lastSeenMs < cutoffMs) {
          this.#clientCount -= route.clients.size
          tenant.routes.delete(label)
          continue
        }
        for (const day of route.days.keys()) if (day < firstDay) route.days.delete(day)
        // Least recent first: stop at the first client seen since the cutoff.
        for (const [id, client] of route.clients) {
          if (client.lastSeenMs >= cutoffMs) break
          route.clients.delete(id)
          route.clientsSwept++
          this.#clientCount--
        }
      }
      if (tenant.routes.size === 0 && tenant.share.size === 0) this.tenants.delete(name)
    }
  }

  /**
   * Drops the least recent clients past bounds a reload lowered. The records of a tenant or route
   * a reload removed stay (not listed, bounded by `maxTotal` and aged out by `retentionDays` as
   * all are): a route that comes back has its history, as it has with Redis, and an answer's
   * `since` stays true of it (SPEC 12).
   */
  applyBounds(): void {
    for (const [name, tenant] of this.tenants) {
      const { maxPerRoute } = this.bounds.forTenant(name)
      for (const route of tenant.routes.values()) while (route.clients.size > maxPerRoute) this.#evictLeastRecent(route)
    }
    this.#evictDownTo(this.bounds.maxTotal)
  }

  /**
   * This delta in parts of at most `maxClients` client records each, written one after another so
   * that each write is short beside the store's command timeout (a long outage can gather tens of
   * thousands of clients). A route's counts and departed ids go in the part being filled when the
   * route is reached, its clients from there on, into later parts (with no counts of their own)
   * once a part is full; a tenant's legacy share likewise. The parts hold this delta's records,
   * which is not used after.
   */
  parts(maxClients: number): RegistryData[] {
    const parts: RegistryData[] = []
    let part = new RegistryData(this.startMs, this.bounds, this.trackDays)
    let held = 0
    for (const [name, tenant] of this.tenants) {
      for (const [day, counts] of tenant.share) part.tenant(name).share.set(day, counts)
      for (const [label, route] of tenant.routes) {
        let into = new RouteData()
        into.requests = route.requests
        into.lastSeenMs = route.lastSeenMs
        into.lastSeenNonExemptMs = route.lastSeenNonExemptMs
        into.clientsEvicted = route.clientsEvicted
        into.clientsSwept = route.clientsSwept
        into.distinct.merge(route.distinct)
        into.departed = route.departed
        for (const [day, count] of route.days) into.days.set(day, count)
        part.tenant(name).routes.set(label, into)
        for (const client of route.clients.values()) {
          if (held === maxClients) {
            parts.push(part)
            part = new RegistryData(this.startMs, this.bounds, this.trackDays)
            held = 0
            // No counts of its own, but its last seen (a maximum, so written again it changes
            // nothing): the retention sweep of a delta kept after a failed write reads it.
            into = new RouteData()
            into.lastSeenMs = route.lastSeenMs
            into.lastSeenNonExemptMs = route.lastSeenNonExemptMs
            part.tenant(name).routes.set(label, into)
          }
          into.clients.set(client.id, client)
          part.#clientCount++
          held++
        }
      }
    }
    parts.push(part)
    return parts
  }

  /**
   * What of this delta the store refused: each listed tenant's legacy share (`route` undefined)
   * and each listed route whole, moved into a delta of their own (this one is not used after).
   */
  only(refused: ReadonlyArray<{ readonly tenant: string; readonly route: string | undefined }>): RegistryData {
    const kept = new RegistryData(this.startMs, this.bounds, this.trackDays)
    for (const { tenant, route } of refused) {
      const mine = this.tenants.get(tenant)
      if (mine === undefined) continue
      if (route === undefined) {
        for (const [day, counts] of mine.share) kept.tenant(tenant).share.set(day, counts)
        continue
      }
      const data = mine.routes.get(route)
      if (data === undefined) continue
      kept.tenant(tenant).routes.set(route, data)
      kept.#clientCount += data.clients.size
      if (data.departed !== undefined) kept.#departedCount += data.departed.size
    }
    return kept
  }

  /** Adds a delta that could not be written back into this one (counts summed, last seen the later, distinct sets merged). */
  absorb(older: RegistryData): void {
    this.startMs = Math.min(this.startMs, older.startMs)
    for (const [name, theirs] of older.tenants) {
      const mine = this.tenant(name)
      for (const [day, counts] of theirs.share) {
        const share = this.#share(mine, day)
        share.legacy += counts.legacy
        share.native += counts.native
      }
      for (const [label, route] of theirs.routes) {
        let into = mine.routes.get(label)
        if (into === undefined) mine.routes.set(label, (into = new RouteData()))
        into.requests += route.requests
        into.lastSeenMs = Math.max(into.lastSeenMs, route.lastSeenMs)
        into.lastSeenNonExemptMs = Math.max(into.lastSeenNonExemptMs, route.lastSeenNonExemptMs)
        into.clientsEvicted += route.clientsEvicted
        into.clientsSwept += route.clientsSwept
        into.distinct.merge(route.distinct)
        if (route.departed !== undefined) for (const [id, days] of route.departed) this.#depart(into, id, days)
        for (const [day, count] of route.days) {
          const target = into.days.get(day)
          if (target === undefined) into.days.set(day, count)
          else {
            target.requests += count.requests
            target.clients.merge(count.clients)
          }
        }
        // The older clients go first, so that the Map stays least recent first.
        const newer = [...into.clients.values()]
        into.clients.clear()
        for (const client of route.clients.values()) into.clients.set(client.id, client)
        this.#clientCount += route.clients.size
        for (const client of newer) {
          const old = into.clients.get(client.id)
          if (old !== undefined) {
            into.clients.delete(client.id)
            this.#mergeClient(client, old)
            this.#clientCount--
          }
          into.clients.set(client.id, client)
        }
      }
    }
  }

  /**
   * `older`'s record of a client into `client`'s (SPEC 12: counts summed, last-seen the later).
   * Samples carry their arrival, so the newer delta's record may have seen the client last
   * earlier; its days stay one entry per UTC day, however many refused writes absorb them.
   */
  #mergeClient(client: ClientRecord, older: ClientRecord): void {
    client.requests += older.requests
    client.firstSeenMs = Math.min(client.firstSeenMs, older.firstSeenMs)
    client.lastBrownoutMs = Math.max(client.lastBrownoutMs, older.lastBrownoutMs)
    if (this.trackDays) {
      const days = new Set([...(older.days ?? []), dayOf(older.lastSeenMs), ...(client.days ?? []), dayOf(client.lastSeenMs)])
      days.delete(dayOf(Math.max(client.lastSeenMs, older.lastSeenMs)))
      client.days = days.size === 0 ? undefined : [...days]
    }
    if (older.lastSeenMs > client.lastSeenMs) {
      client.lastSeenMs = older.lastSeenMs
      client.userAgent = older.userAgent
    }
  }

  #share(tenant: TenantData, day: number): { legacy: number; native: number } {
    let share = tenant.share.get(day)
    if (share === undefined) {
      tenant.share.set(day, (share = { legacy: 0, native: 0 }))
      for (const old of tenant.share.keys()) if (old <= day - DAYS_KEPT) tenant.share.delete(old)
    }
    return share
  }

  #evictLeastRecent(route: RouteData): void {
    const oldest = route.clients.values().next()
    if (oldest.done === true) return
    route.clients.delete(oldest.value.id)
    route.clientsEvicted++
    this.#clientCount--
    // A delta for the store: the client is counted in the fleet's distinct logs all the same.
    if (this.trackDays) this.#depart(route, oldest.value.id, [...(oldest.value.days ?? []), dayOf(oldest.value.lastSeenMs)])
  }

  /** Holds a departed client's id and days, the days added to those already held for it; new ids up to `maxTotal`. */
  #depart(route: RouteData, id: string, days: readonly number[]): void {
    const held = route.departed?.get(id)
    if (held !== undefined) {
      for (const day of days) if (!held.includes(day)) held.push(day)
      return
    }
    if (this.#departedCount >= this.bounds.maxTotal) return
    ;(route.departed ??= new Map()).set(id, [...new Set(days)])
    this.#departedCount++
  }

  /** SPEC 12's `maxTotal`: the largest route gives up its least recent client until at most `count` are kept. */
  #evictDownTo(count: number): void {
    while (this.#clientCount > count) {
      const largest = this.#largestRoute()
      if (largest === undefined || largest.clients.size === 0) return
      this.#evictLeastRecent(largest)
    }
  }

  #largestRoute(): RouteData | undefined {
    let largest: RouteData | undefined
    for (const tenant of this.tenants.values()) {
      for (const route of tenant.routes.values()) if (largest === undefined || route.clients.size > largest.clients.size) largest = route
    }
    return largest
  }
}
