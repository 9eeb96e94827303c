/**
 * SPEC 13's emergency lever: a pause stops every brownout and every `afterSunset: gone` answer of
 * a tenant, or of one route, until its `until`. Pauses belong to the process, not to a config:
 * each runtime a reload builds is handed the same set, so a reload keeps them. (With Redis, SPEC
 * 14's fleet-wide copy is not built yet: a pause holds on the replica that took it.)
 */
export interface BrownoutPause {
  readonly tenant: string
  /** `METHOD /path` of the route, or null for the whole tenant. */
  readonly route: string | null
  readonly until: string
  readonly reason: string
  readonly setAt: string
}

/** SPEC 13: a pause ends at most this far ahead. */
export const MAX_PAUSE_MS = 30 * 24 * 3_600_000

export class BrownoutPauses {
  readonly #pauses = new Map<string, BrownoutPause & { untilMs: number }>()

  set(pause: BrownoutPause): void {
    this.#pauses.set(pauseKey(pause.tenant, pause.route), { ...pause, untilMs: Date.parse(pause.until) })
  }

  /** The pause removed, or undefined when there was none. */
  remove(tenant: string, route: string | null): BrownoutPause | undefined {
    const key = pauseKey(tenant, route)
    const pause = this.#pauses.get(key)
    this.#pauses.delete(key)
    return pause === undefined ? undefined : withoutMs(pause)
  }

  /** The pause in force for a route at `nowMs`: the route's own, else the tenant's. */
  activeFor(tenant: string, route: string, nowMs: number): BrownoutPause | undefined {
    if (this.#pauses.size === 0) return undefined
    return this.#active(pauseKey(tenant, route), nowMs) ?? this.#active(pauseKey(tenant, null), nowMs)
  }

  /** Pauses not yet expired at `nowMs`; expired ones are removed (SPEC 14's expiry). */
  list(nowMs: number): BrownoutPause[] {
    const listed: BrownoutPause[] = []
    for (const [key, pause] of this.#pauses) {
      if (pause.untilMs <= nowMs) this.#pauses.delete(key)
      else listed.push(withoutMs(pause))
    }
    return listed
  }

  #active(key: string, nowMs: number): BrownoutPause | undefined {
    const pause = this.#pauses.get(key)
    return pause !== undefined && pause.untilMs > nowMs ? pause : undefined
  }
}

function pauseKey(tenant: string, route: string | null): string {
  return route === null ? `${tenant}\0` : `${tenant}\0${route}`
}

function withoutMs(pause: BrownoutPause & { untilMs: number }): BrownoutPause {
  return { tenant: pause.tenant, route: pause.route, until: pause.until, reason: pause.reason, setAt: pause.setAt }
}
