import { brownoutWindows, effectiveDeprecation, sameBrownouts, type DeprecationConfig } from './config/deprecation.js'
import type { GatewayConfig } from './config/schema.js'

/**
 * SPEC 13's `v4gw calendar`: every brownout window and sunset of a config, for the announcement
 * to clients. A route's own deprecation (SPEC 14's merge) is listed apart only when its windows
 * or sunset differ from its tenant's; the others are covered by the tenant's events.
 */
export interface CalendarEvent {
  tenant: string
  /** `METHOD /path`, or null for every legacy route of the tenant that has no schedule of its own. */
  route: string | null
  /** On a tenant's event: its routes with a schedule of their own (listed apart) or none, which it does not cover. */
  except?: readonly string[]
  kind: 'brownout' | 'sunset'
  startMs: number
  /** A window's end; a sunset is an instant. */
  endMs: number | null
  /** Percent of clients a window selects (SPEC 13); the sunset's `afterSunset`. */
  detail: string
}

export function calendarEvents(config: GatewayConfig, onlyTenant?: string): CalendarEvent[] {
  const events: CalendarEvent[] = []
  for (const [name, tenant] of Object.entries(config.tenants)) {
    if (onlyTenant !== undefined && name !== onlyTenant) continue
    const own = tenant.legacy.deprecation
    const apart: string[] = []
    for (const route of tenant.legacy.routes) {
      const label = `${route.method} ${route.path}`
      const entry = tenant.migration.routes[label]?.deprecation
      if (entry === undefined) continue
      const effective = effectiveDeprecation(own, entry) ?? null
      if (sameSchedule(effective, own)) continue
      apart.push(label)
      events.push(...eventsOf(name, label, effective))
    }
    // A route with `deprecation: null`, or windows of its own, is not in the tenant's windows: they say so.
    events.push(...eventsOf(name, null, own).map((event) => (apart.length === 0 ? event : { ...event, except: apart })))
  }
  return events.sort((a, b) => a.startMs - b.startMs || a.tenant.localeCompare(b.tenant) || (a.route ?? '').localeCompare(b.route ?? ''))
}

function eventsOf(tenant: string, route: string | null, deprecation: DeprecationConfig | null): CalendarEvent[] {
  if (deprecation === null) return []
  const share = `${deprecation.brownouts?.clients ?? 100} % of clients`
  const events: CalendarEvent[] = brownoutWindows(deprecation.brownouts).map((window) => ({ tenant, route, kind: 'brownout', startMs: window.startMs, endMs: window.endMs, detail: share }))
  if (deprecation.sunset !== undefined) events.push({ tenant, route, kind: 'sunset', startMs: Date.parse(deprecation.sunset), endMs: null, detail: deprecation.afterSunset === 'gone' ? 'gone: 410 LEGACY_GONE from then on' : 'served on, information only' })
  return events
}

function sameSchedule(a: DeprecationConfig | null, b: DeprecationConfig | null): boolean {
  return a?.sunset === b?.sunset && a?.afterSunset === b?.afterSunset && sameBrownouts(a, b)
}

function summary(event: CalendarEvent): string {
  const where = event.route === null ? `tenant ${event.tenant}, legacy routes${exceptions(event)}` : `tenant ${event.tenant}, ${event.route}`
  return event.kind === 'brownout' ? `Legacy API brownout (${where})` : `Legacy API sunset (${where})`
}

function exceptions(event: CalendarEvent): string {
  return event.except === undefined ? '' : ` except ${event.except.join(', ')}`
}

/** RFC 5545 3.3.5: a UTC DATE-TIME, `20270302T140000Z`. */
function icsTime(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}Z$/, 'Z')
}

/** RFC 5545 3.3.11: TEXT with `\`, `;`, `,` and line breaks escaped. */
function icsText(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/;/g, '\\;').replace(/,/g, '\\,').replace(/\r?\n/g, '\\n')
}

/** RFC 5545 3.1: lines of at most 75 octets, folded with CRLF and a space, never inside a UTF-8 character. */
export function foldLine(line: string): string {
  const parts: string[] = []
  let current = ''
  let octets = 0
  for (const char of line) {
    const size = Buffer.byteLength(char, 'utf8')
    // The first line holds 75 octets, each continuation 74 after its leading space.
    if (octets + size > (parts.length === 0 ? 75 : 74)) {
      parts.push(current)
      current = ''
      octets = 0
    }
    current += char
    octets += size
  }
  parts.push(current)
  return parts.join('\r\n ')
}

/** The events as an iCalendar file (RFC 5545): one VEVENT each, UTC times, CRLF line ends. */
export function formatIcs(events: readonly CalendarEvent[], nowMs: number): string {
  const lines = ['BEGIN:VCALENDAR', 'VERSION:2.0', 'PRODID:-//v4-migration-gateway//v4gw calendar//EN', 'CALSCALE:GREGORIAN', 'METHOD:PUBLISH']
  for (const event of events) {
    // Stable across runs, so a calendar that imports the file again updates instead of duplicating;
    // one per event (RFC 5545 3.8.4.7): the tenant and route encoded, not folded together
    // (`POST /v1/a.b` and `POST /v1/a-b` made one UID, and a calendar kept one of the two).
    const uid = `${event.kind}-${icsTime(event.startMs)}-${encodeURIComponent(event.tenant)}-${event.route === null ? 'all' : encodeURIComponent(event.route)}@v4gw`
    lines.push('BEGIN:VEVENT', `UID:${uid}`, `DTSTAMP:${icsTime(nowMs)}`, `DTSTART:${icsTime(event.startMs)}`)
    if (event.endMs !== null) lines.push(`DTEND:${icsTime(event.endMs)}`)
    lines.push(`SUMMARY:${icsText(summary(event))}`)
    const description =
      event.kind === 'brownout'
        ? `Selected clients (${event.detail}) get 410 LEGACY_BROWNOUT on the legacy API during this window. Move to the V4 API to avoid it.`
        : `The legacy API's sunset: ${event.detail}.`
    lines.push(`DESCRIPTION:${icsText(description)}`, 'TRANSP:TRANSPARENT', 'END:VEVENT')
  }
  lines.push('END:VCALENDAR')
  return lines.map(foldLine).join('\r\n') + '\r\n'
}

/** The events as a Markdown table. */
export function formatCalendarMarkdown(events: readonly CalendarEvent[]): string {
  // Minutes as people write them; the seconds (and milliseconds) too when the instant has any, so the table says what the gateway does.
  const when = (ms: number): string => {
    const iso = new Date(ms).toISOString()
    const shown = ms % 60_000 === 0 ? iso.slice(0, 16) : ms % 1_000 === 0 ? iso.slice(0, 19) : iso.slice(0, 23)
    return `${shown.replace('T', ' ')} UTC`
  }
  const lines = ['| tenant | routes | event | starts | ends | who |', '|---|---|---|---|---|---|']
  for (const event of events) {
    lines.push(`| ${event.tenant} | ${event.route ?? `all legacy routes${exceptions(event)}`} | ${event.kind} | ${when(event.startMs)} | ${event.endMs === null ? '–' : when(event.endMs)} | ${event.detail} |`)
  }
  if (events.length === 0) lines.push('| – | – | no brownout window or sunset configured | – | – | – |')
  return `${lines.join('\n')}\n`
}
