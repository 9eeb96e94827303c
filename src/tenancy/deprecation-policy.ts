import { brownoutWindows, effectiveDeprecation, sameBrownouts, type DeprecationConfig } from '../config/deprecation.js'
import type { TenantConfig } from '../config/schema.js'

/**
 * SPEC 13 for one tenant's route, resolved at load so that a request only compares numbers: the
 * headers that do not depend on the request, the windows as instants, by start, the percentage as
 * a bucket bound, and the exemptions by client id.
 */
export interface DeprecationPolicy {
  /** `Deprecation`, `Sunset` and the `Link` relations that are the same for every request. */
  readonly headers: Readonly<Record<string, string>>
  /** Whether a `successor-version` link is added (it names the request's own V4 path). */
  readonly successor: boolean
  readonly sunsetMs: number | undefined
  readonly sunset: string | undefined
  readonly link: string | undefined
  /** `afterSunset: gone`: past the sunset, 410 LEGACY_GONE. */
  readonly goneAfterSunset: boolean
  readonly windows: readonly { readonly startMs: number; readonly endMs: number }[]
  /** A client is selected when its bucket is below this (SPEC 13: `clients × 100`). */
  readonly bucketBound: number
  /** Client id to the instant its exemption ends. */
  readonly exemptUntilMs: ReadonlyMap<string, number>
}

/** The header values SPEC 6 and 13 give a deprecation: RFC 9745, RFC 8594, RFC 8288. */
export function buildDeprecationHeaders(deprecation: Pick<DeprecationConfig, 'date' | 'sunset' | 'link' | 'sunsetLink'> | null): Record<string, string> | null {
  if (deprecation === null) return null
  const headers: Record<string, string> = { deprecation: `@${Math.floor(Date.parse(deprecation.date) / 1000)}` }
  if (deprecation.sunset !== undefined) headers.sunset = new Date(deprecation.sunset).toUTCString()
  // WHATWG serialisation percent-encodes what a header value cannot carry (e.g. a non-ASCII path).
  const links: string[] = []
  if (deprecation.link !== undefined) links.push(`<${new URL(deprecation.link).href}>; rel="deprecation"`)
  // RFC 8594 3: the sunset policy.
  if (deprecation.sunsetLink !== undefined) links.push(`<${new URL(deprecation.sunsetLink).href}>; rel="sunset"`)
  if (links.length > 0) headers.link = links.join(', ')
  return headers
}

export function buildDeprecationPolicy(deprecation: DeprecationConfig | null): DeprecationPolicy | null {
  if (deprecation === null) return null
  const sunsetMs = deprecation.sunset === undefined ? undefined : Date.parse(deprecation.sunset)
  const exemptUntilMs = new Map<string, number>()
  for (const exemption of deprecation.exempt) exemptUntilMs.set(exemption.client, Date.parse(exemption.until))
  return Object.freeze({
    headers: Object.freeze(buildDeprecationHeaders(deprecation) as Record<string, string>),
    successor: deprecation.successor,
    sunsetMs,
    sunset: sunsetMs === undefined ? undefined : new Date(sunsetMs).toISOString(),
    link: deprecation.link === undefined ? undefined : new URL(deprecation.link).href,
    goneAfterSunset: deprecation.afterSunset === 'gone' && sunsetMs !== undefined,
    windows: Object.freeze(brownoutWindows(deprecation.brownouts).map(({ startMs, endMs }) => Object.freeze({ startMs, endMs }))),
    bucketBound: deprecation.brownouts === null ? 0 : Math.round(deprecation.brownouts.clients * 100),
    exemptUntilMs
  })
}

/** The deprecation headers of one answer: the fixed ones, and the successor-version link to `successorPath` (SPEC 13). */
export function deprecationHeadersFor(policy: DeprecationPolicy, successorPath: string | undefined): Record<string, string> {
  if (!policy.successor || successorPath === undefined) return { ...policy.headers }
  // A path parameter came from the request: what could end the <…> is percent-encoded (RFC 8288 3).
  const successor = `<${successorPath.replace(/[<>"\s]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)}>; rel="successor-version"`
  const link = policy.headers.link
  return { ...policy.headers, link: link === undefined ? successor : `${link}, ${successor}` }
}

export interface UpcomingBrownout {
  tenant: string
  /** `METHOD /path`, or null for a window of the tenant's deprecation. */
  route: string | null
  start: string
  end: string
  /** On a tenant's window: its routes that do not take it (`deprecation: null`, or windows of their own listed apart). */
  except?: string[]
}

/**
 * SPEC 13: windows active at `nowMs` or starting within 24 h, for a reload's answer and log: the
 * tenant's, saying which routes do not take them, and a route's listed apart only when its
 * windows or share differ from the tenant's (as `v4gw calendar` shows them).
 */
export function listUpcomingBrownouts(tenants: Readonly<Record<string, TenantConfig>>, nowMs: number): UpcomingBrownout[] {
  const horizonMs = nowMs + 24 * 3_600_000
  const upcoming: UpcomingBrownout[] = []
  const add = (tenant: string, route: string | null, deprecation: DeprecationConfig | null | undefined, except: string[]) => {
    for (const window of brownoutWindows(deprecation?.brownouts ?? null)) {
      if (window.endMs > nowMs && window.startMs <= horizonMs) {
        upcoming.push({ tenant, route, start: new Date(window.startMs).toISOString(), end: new Date(window.endMs).toISOString(), ...(except.length === 0 ? {} : { except }) })
      }
    }
  }
  for (const [name, tenant] of Object.entries(tenants)) {
    const own = tenant.legacy.deprecation
    const apart = Object.entries(tenant.migration.routes).flatMap(([route, entry]) => {
      if (entry.deprecation === undefined) return []
      const effective = effectiveDeprecation(own, entry.deprecation)
      return sameBrownouts(effective, own) ? [] : [{ route, effective }]
    })
    add(name, null, own, apart.map(({ route }) => route))
    for (const { route, effective } of apart) add(name, route, effective, [])
  }
  return upcoming
}
