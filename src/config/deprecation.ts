/**
 * SPEC 13's deprecation of a tenant or one route, as the config gives it, and what follows from
 * it without a request: the effective value of a route (SPEC 14's merge), its brownout windows,
 * and the problems a file can have that a schema cannot say.
 */

export interface BrownoutWindowConfig {
  start: string
  end: string
}

export interface EscalationConfig {
  first: string
  everyMs: number
  durationsMs: number[]
}

export interface BrownoutsConfig {
  windows: BrownoutWindowConfig[]
  escalation: EscalationConfig | null
  clients: number
  minNoticeMs: number
}

export interface ExemptionConfig {
  client: string
  until: string
  reason?: string | undefined
}

export interface DeprecationConfig {
  date: string
  sunset?: string | undefined
  link?: string | undefined
  sunsetLink?: string | undefined
  successor: boolean
  afterSunset: 'serve' | 'gone'
  brownouts: BrownoutsConfig | null
  exempt: ExemptionConfig[]
}

/**
 * A route's `deprecation` in `migration.routes`: each key it gives replaces the tenant's, and
 * `null` removes the tenant's value (SPEC 14); `date` stays (a deprecation has one).
 */
export type RouteDeprecationConfig = { date?: string | undefined } & { [K in Exclude<keyof DeprecationConfig, 'date'>]?: DeprecationConfig[K] | null | undefined }

/** The defaults of SPEC 13 for the keys a route's entry may leave out when the tenant has none. */
const DEFAULTS: Omit<DeprecationConfig, 'date'> = { successor: true, afterSunset: 'serve', brownouts: null, exempt: [] }

/** SPEC 13 default of `brownouts.minNoticeMs`: 14 days. */
export const DEFAULT_MIN_NOTICE_MS = 14 * 24 * 3_600_000

/**
 * A route's deprecation (SPEC 14: merged over the tenant's key by key, one level deep; `null`
 * removes it for that route). `undefined` when a route entry gives keys but no `date` can be had.
 */
export function effectiveDeprecation(tenant: DeprecationConfig | null, route: RouteDeprecationConfig | null | undefined): DeprecationConfig | null | undefined {
  if (route === undefined) return tenant
  if (route === null) return null
  const merged: Record<string, unknown> = { ...DEFAULTS, ...(tenant ?? {}) }
  for (const [key, value] of Object.entries(route)) {
    if (value === undefined) continue
    // `null` takes the tenant's value away: the key's default (brownouts: none), or no key at all.
    if (value === null) {
      if (key in DEFAULTS) merged[key] = DEFAULTS[key as keyof typeof DEFAULTS]
      else delete merged[key]
    } else merged[key] = value
  }
  return merged.date === undefined ? undefined : (merged as unknown as DeprecationConfig)
}

export interface BrownoutWindow {
  readonly startMs: number
  readonly endMs: number
  /** Where the window came from, for problems: `windows/2`, `escalation/1`. */
  readonly source: readonly (string | number)[]
}

/** The same brownout windows for the same share of clients (a reload's listing and `v4gw calendar` tell routes apart by it). */
export function sameBrownouts(a: DeprecationConfig | null | undefined, b: DeprecationConfig | null | undefined): boolean {
  return JSON.stringify([brownoutWindows(a?.brownouts ?? null), a?.brownouts?.clients]) === JSON.stringify([brownoutWindows(b?.brownouts ?? null), b?.brownouts?.clients])
}

/** SPEC 13: the listed windows and the escalation ladder (window n at `first + n × everyMs`, lasting `durationsMs[n]`), by start. */
export function brownoutWindows(brownouts: BrownoutsConfig | null): BrownoutWindow[] {
  if (brownouts === null) return []
  const windows: BrownoutWindow[] = brownouts.windows.map((window, index) => ({ startMs: Date.parse(window.start), endMs: Date.parse(window.end), source: ['windows', index] }))
  const ladder = brownouts.escalation
  if (ladder !== null) {
    const first = Date.parse(ladder.first)
    ladder.durationsMs.forEach((durationMs, index) => {
      const startMs = first + index * ladder.everyMs
      windows.push({ startMs, endMs: startMs + durationMs, source: ['escalation', index] })
    })
  }
  return windows.sort((a, b) => a.startMs - b.startMs || a.endMs - b.endMs)
}

/** ECMA-262's time values end 8.64e15 ms after the epoch; a window past it has no instant to write. */
const LAST_DATE_MS = 8.64e15
const LAST_DATE = new Date(LAST_DATE_MS).toISOString()
const isDate = (ms: number): boolean => Math.abs(ms) <= LAST_DATE_MS

export interface DeprecationProblem {
  path: (string | number)[]
  message: string
}

/** SPEC 13 "validation at load", beyond what each key's own schema says. Paths are relative to the deprecation. */
export function deprecationProblems(deprecation: DeprecationConfig): DeprecationProblem[] {
  const problems: DeprecationProblem[] = []
  const dateMs = Date.parse(deprecation.date)
  const sunsetMs = deprecation.sunset === undefined ? undefined : Date.parse(deprecation.sunset)
  if (sunsetMs !== undefined && !(sunsetMs > dateMs)) problems.push({ path: ['sunset'], message: 'sunset must be after date' })
  if (deprecation.afterSunset === 'gone' && sunsetMs === undefined) problems.push({ path: ['afterSunset'], message: 'afterSunset: gone needs a sunset' })
  const brownouts = deprecation.brownouts
  if (brownouts !== null) {
    const earliestMs = dateMs + brownouts.minNoticeMs
    let previous: BrownoutWindow | undefined
    for (const window of brownoutWindows(brownouts)) {
      const path = ['brownouts', ...window.source]
      // Every later step (the Sunset header, the calendar, the page) writes the window's instants.
      if (!isDate(window.startMs) || !isDate(window.endMs)) {
        problems.push({ path, message: `a window must end by ${LAST_DATE}, the last instant a date can hold` })
        continue
      }
      if (!(window.startMs < window.endMs)) problems.push({ path, message: 'a window starts before it ends' })
      if (window.startMs < earliestMs) {
        const notice = isDate(earliestMs) ? new Date(earliestMs).toISOString() : `after ${LAST_DATE}`
        problems.push({ path, message: `starts ${new Date(window.startMs).toISOString()}, before date + minNoticeMs (${notice}); set brownouts.minNoticeMs: 0 to allow short notice` })
      }
      if (sunsetMs !== undefined && window.endMs > sunsetMs) problems.push({ path, message: `ends ${new Date(window.endMs).toISOString()}, after the sunset` })
      if (previous !== undefined && window.startMs < previous.endMs) {
        problems.push({ path, message: `overlaps the window of brownouts.${previous.source.join('.')}` })
      }
      previous = window
    }
  }
  const seen = new Set<string>()
  deprecation.exempt.forEach((exemption, index) => {
    if (seen.has(exemption.client)) problems.push({ path: ['exempt', index, 'client'], message: 'this client is exempt twice' })
    seen.add(exemption.client)
  })
  return problems
}

/** The next `count` windows that have not ended by `nowMs` (check-config, the reload's `upcomingBrownouts`). */
export function nextBrownoutWindows(deprecation: DeprecationConfig | null, nowMs: number, count: number): { start: string; end: string }[] {
  if (deprecation === null) return []
  return brownoutWindows(deprecation.brownouts)
    .filter((window) => window.endMs > nowMs)
    .slice(0, count)
    .map((window) => ({ start: new Date(window.startMs).toISOString(), end: new Date(window.endMs).toISOString() }))
}

/** What `check-config` prints of a deprecation (SPEC 13): its dates, its next five windows, exemptions that expired. */
export function describeDeprecation(deprecation: DeprecationConfig, nowMs: number): string[] {
  const lines = [`deprecation ${deprecation.date}${deprecation.sunset === undefined ? '' : `, sunset ${deprecation.sunset} (afterSunset ${deprecation.afterSunset})`}`]
  const next = nextBrownoutWindows(deprecation, nowMs, 5)
  if (deprecation.brownouts !== null) {
    const share = `${deprecation.brownouts.clients}% of clients`
    lines.push(next.length === 0 ? `no brownout windows ahead (${share})` : `next brownouts (${share}): ${next.map((window) => `${window.start} to ${window.end}`).join(', ')}`)
  }
  for (const exemption of deprecation.exempt) {
    if (Date.parse(exemption.until) <= nowMs) lines.push(`exemption of ${exemption.client} expired ${exemption.until}: it is ignored`)
  }
  return lines
}
