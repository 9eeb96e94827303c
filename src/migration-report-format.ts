/**
 * `v4gw report`'s formats of SPEC 12's `/admin/migration` answer: Markdown to paste into a
 * migration status update, and CSV safe to open in a spreadsheet. Everything a client sent (its
 * user agent, a `hdr:` id) is data: in Markdown it cannot end a cell or a line, in CSV it cannot
 * start a formula.
 */

export interface MigrationAnswer {
  schemaVersion: number
  generatedAt: string
  scope: 'fleet' | 'local' | 'replica'
  configHashes: string[]
  tenants: Record<string, TenantAnswer>
}

export interface TenantAnswer {
  since: string
  stage: string
  legacyShare: { day: string; legacy: number; native: number }[]
  brownoutPause: { until: string; reason: string } | null
  routes: Record<string, RouteAnswer>
}

export interface RouteAnswer {
  stage: string
  requests: number
  lastSeen: string | null
  lastSeenNonExempt: string | null
  distinctClients: number
  clientsListed: number
  clientsEvicted: number
  deprecation: { date: string; sunset: string | null; afterSunset: string; nextBrownouts: { start: string; end: string }[] } | null
  brownoutPause?: { until: string; reason: string } | null
  clients: ClientAnswer[]
}

export interface ClientAnswer {
  clientId: string
  label: string | null
  owner: string | null
  userAgent: string | null
  requests: number
  firstSeen: string
  lastSeen: string
  lastBrownout: string | null
  exemptUntil: string | null
}

const SCOPE_WORDS = {
  fleet: 'every replica (fleet)',
  local: "one replica only, while the shared store is down (local): other replicas' traffic is missing",
  replica: 'this process only (replica, store: memory)'
} as const

/**
 * A Markdown table cell: no line break, no `|` that would end it, no backtick or angle bracket
 * that would format it, and no bare URL, `www.` name or e-mail address that GitHub's Markdown
 * would make a link of (GFM's autolink extension): a client's user agent is its own text.
 */
function cell(value: string | number | null | undefined): string {
  if (value === null || value === undefined || value === '') return '–'
  return String(value)
    .replace(/[\p{Cc}\u2028\u2029]+/gu, ' ')
    .replace(/([\\|`*_<>[\]@])/g, '\\$1')
    .replace(/:(?=\/\/)/g, '\\:')
    .replace(/(www)\./gi, '$1\\.')
}

/** An instant as a person reads it in a status update: `2026-11-26 14:03 UTC`. */
function when(instant: string | null): string {
  return instant === null ? 'never' : `${instant.slice(0, 10)} ${instant.slice(11, 16)} UTC`
}

/** `1 legacy request`, `3 legacy requests`. */
function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`
}

function percent(part: number, whole: number): string {
  return whole === 0 ? '–' : `${((100 * part) / whole).toFixed(1)} %`
}

function row(cells: (string | number | null | undefined)[]): string {
  return `| ${cells.map(cell).join(' | ')} |`
}

function table(header: string[], rows: (string | number | null | undefined)[][]): string[] {
  return [row(header), `|${header.map(() => '---').join('|')}|`, ...rows.map(row)]
}

/** The Markdown report: per tenant the legacy share burn-down, the routes, and the clients still calling, most recent first. */
export function formatMarkdown(answer: MigrationAnswer): string {
  const lines: string[] = ['# Legacy API migration status', '']
  lines.push(`Generated ${when(answer.generatedAt)} from ${SCOPE_WORDS[answer.scope]}; config ${answer.configHashes.join(', ')}.`, '')
  for (const [name, tenant] of Object.entries(answer.tenants)) {
    const routes = Object.entries(tenant.routes)
    const total = routes.reduce((sum, [, route]) => sum + route.requests, 0)
    const callers = new Set(routes.flatMap(([, route]) => route.clients.map((client) => client.clientId)))
    lines.push(`## Tenant ${cell(name)}`, '')
    const used = routes.filter(([, route]) => route.requests > 0).length
    lines.push(`Counting since ${when(tenant.since)}: ${count(total, 'legacy request')} from ${count(callers.size, 'listed client')} on ${used} of ${count(routes.length, 'legacy route')}.`)
    if (tenant.brownoutPause !== null) lines.push(`Brownouts are paused until ${when(tenant.brownoutPause.until)} (${cell(tenant.brownoutPause.reason)}).`)
    lines.push('', '### Burn-down: legacy share of requests per UTC day', '')
    if (tenant.legacyShare.length === 0) lines.push('No requests in the last 30 days.')
    else lines.push(...table(['day', 'legacy', 'native', 'legacy share'], tenant.legacyShare.map((day) => [day.day, day.legacy, day.native, percent(day.legacy, day.legacy + day.native)])))
    lines.push('', '### Legacy routes', '')
    lines.push(
      ...table(
        ['route', 'stage', 'requests', 'clients', 'last call', 'last call not exempt', 'sunset', 'next brownout'],
        routes.map(([label, route]) => [
          label,
          route.stage,
          route.requests,
          route.clientsEvicted > 0 ? `${route.distinctClients} (${route.clientsEvicted} evicted from the list)` : route.distinctClients,
          when(route.lastSeen),
          when(route.lastSeenNonExempt),
          route.deprecation?.sunset === null || route.deprecation === null ? null : when(route.deprecation.sunset),
          route.deprecation?.nextBrownouts[0] === undefined ? null : `${when(route.deprecation.nextBrownouts[0].start)} to ${when(route.deprecation.nextBrownouts[0].end)}`
        ])
      )
    )
    const clients = routes
      .flatMap(([label, route]) => route.clients.map((client) => ({ label, client })))
      .sort((a, b) => Date.parse(b.client.lastSeen) - Date.parse(a.client.lastSeen))
    lines.push('', '### Clients still calling, most recent first', '')
    if (clients.length === 0) lines.push('None.')
    else {
      lines.push(
        ...table(
          ['client', 'owner', 'route', 'last call', 'requests', 'user agent', 'last brownout', 'exempt until'],
          clients.map(({ label, client }) => [
            client.label === null ? client.clientId : `${client.label} (${client.clientId})`,
            client.owner,
            label,
            when(client.lastSeen),
            client.requests,
            client.userAgent,
            client.lastBrownout === null ? null : when(client.lastBrownout),
            client.exemptUntil === null ? null : when(client.exemptUntil)
          ])
        )
      )
    }
    lines.push('')
  }
  return `${lines.join('\n')}\n`
}

const CSV_HEADER = ['tenant', 'route', 'routeRequests', 'routeLastSeen', 'routeLastSeenNonExempt', 'clientId', 'label', 'owner', 'userAgent', 'requests', 'firstSeen', 'lastSeen', 'lastBrownout', 'exemptUntil']

/**
 * A CSV cell (RFC 4180): one starting with `=`, `+`, `-`, `@`, tab or CR gets a leading `'` so that
 * a spreadsheet reads it as text, not a formula (SPEC 12); quoted when it holds a comma, quote or line break.
 */
export function csvCell(value: string | number | null): string {
  let text = value === null ? '' : String(value)
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
}

/** One row per client of each route (a route without a listed client gets one row without one), CRLF line ends. */
export function formatCsv(answer: MigrationAnswer): string {
  const rows: (string | number | null)[][] = [CSV_HEADER]
  for (const [name, tenant] of Object.entries(answer.tenants)) {
    for (const [label, route] of Object.entries(tenant.routes)) {
      const routeCells = [name, label, route.requests, route.lastSeen, route.lastSeenNonExempt]
      if (route.clients.length === 0) rows.push([...routeCells, null, null, null, null, null, null, null, null, null])
      for (const client of route.clients) {
        rows.push([...routeCells, client.clientId, client.label, client.owner, client.userAgent, client.requests, client.firstSeen, client.lastSeen, client.lastBrownout, client.exemptUntil])
      }
    }
  }
  return rows.map((cells) => cells.map(csvCell).join(',')).join('\r\n') + '\r\n'
}
