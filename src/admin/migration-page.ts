import { createHash } from 'node:crypto'
import { MIGRATION_PAGE_SCRIPT } from './migration-page-script.js'

/**
 * SPEC 12's migration page, `GET /admin/ui`: one self-contained document (no external asset, no
 * build step, works offline) that holds no data; its script fetches `/admin/migration` and
 * `/admin/shadow` with the admin token. The inline style and script are allowed by their SHA-256
 * alone, computed here from the exact text served, so nothing else can run or style the page.
 */
export const MIGRATION_PAGE_PATH = '/admin/ui'

const STYLE = String.raw`
:root { color-scheme: light; --fg: #1d2430; --muted: #5f6b7a; --line: #d8dee6; --bg: #f6f8fa; --accent: #b3541e; --good: #1f7a3a; --bad: #b42318; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: var(--fg); background: #fff; }
header { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: baseline; padding: 12px 24px; border-bottom: 1px solid var(--line); background: var(--bg); }
header h1 { font-size: 18px; margin: 0; }
#status { margin: 0; color: var(--muted); flex: 1 1 320px; }
button { font: inherit; padding: 4px 12px; border: 1px solid var(--line); border-radius: 4px; background: #fff; cursor: pointer; }
button:hover { border-color: var(--muted); }
#token-form { margin: 24px; padding: 16px; max-width: 480px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); }
#token-form label { display: block; font-weight: 600; margin-bottom: 6px; }
#token-form input { font: inherit; width: 100%; padding: 6px 8px; margin-bottom: 8px; border: 1px solid var(--line); border-radius: 4px; }
#token-form p.muted { margin: 0 0 8px; }
#token-message { color: var(--bad); margin: 8px 0 0; }
#token-message:empty { display: none; }
#tenant-nav { display: flex; flex-wrap: wrap; gap: 12px; padding: 8px 24px; }
#tenant-nav:empty { display: none; }
#tenant-nav a { color: var(--accent); }
main { padding: 0 24px 32px; }
.tenant, .suspended { border-top: 1px solid var(--line); padding-top: 8px; margin-top: 16px; }
.tenant:first-child { border-top: 0; }
h2 { font-size: 20px; margin: 12px 0 4px; }
h3 { font-size: 15px; margin: 20px 0 6px; }
h4 { font-size: 13px; margin: 10px 0 4px; color: var(--muted); }
.table-box { overflow-x: auto; }
.muted { color: var(--muted); font-weight: normal; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 6px 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 8px; }
th, td { text-align: left; vertical-align: top; padding: 4px 8px; border-bottom: 1px solid var(--line); }
thead th { font-weight: 600; color: var(--muted); border-bottom: 2px solid var(--line); white-space: nowrap; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
td time { white-space: nowrap; }
td .muted { font-size: 12px; }
tbody th code, summary code { white-space: nowrap; }
code { font: 13px/1.3 ui-monospace, "DejaVu Sans Mono", monospace; }
.user-agent { font: 12px/1.3 ui-monospace, "DejaVu Sans Mono", monospace; word-break: break-all; max-width: 360px; }
.stage { display: inline-block; padding: 0 6px; border-radius: 3px; font-size: 12px; font-weight: 600; border: 1px solid currentColor; }
.stage-legacy { color: #6b3fa0; } .stage-shadow { color: #2b6cb0; } .stage-canary { color: #b7791f; }
.stage-translate { color: var(--good); } .stage-native-only { color: var(--bad); } .stage-unknown { color: var(--muted); }
details.clients { margin: 4px 0 8px; }
details.clients summary { cursor: pointer; padding: 2px 0; }
.chart-box { margin: 0; max-width: 760px; }
.chart { width: 100%; height: auto; display: block; background: var(--bg); border: 1px solid var(--line); border-radius: 4px; }
.chart .bar { fill: var(--accent); }
.chart .bar-empty { fill: var(--line); }
.chart .bar-zero { fill: var(--good); }
.chart .grid { stroke: var(--line); stroke-width: 1; }
.chart .axis { fill: var(--muted); font-size: 11px; }
figcaption { margin-top: 4px; }
td.good, td.bad { font-weight: 600; white-space: nowrap; }
td.good { color: var(--good); } td.bad { color: var(--bad); }
`

const HTML_HEAD = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>v4gw · legacy migration</title>
<link rel="icon" href="data:,">
<style>`

const HTML_BODY = `</style>
</head>
<body>
<header>
<h1>Legacy migration</h1>
<p id="status" role="status">Loading…</p>
<button type="button" id="refresh">Refresh</button>
<button type="button" id="forget" hidden>Forget token</button>
</header>
<form id="token-form" hidden autocomplete="off">
<label for="token">Admin token</label>
<p class="muted">This gateway's admin API needs its token (<code>admin.token</code>). The page keeps it in this tab only (sessionStorage) and sends it as a bearer token.</p>
<input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required>
<button type="submit">Show the migration</button>
<p id="token-message" role="alert"></p>
</form>
<nav id="tenant-nav" aria-label="tenants"></nav>
<main id="tenants"></main>
<footer class="muted">
<h2>Traces</h2>
<p>To follow a legacy call from the client through this gateway to V4, point the gateway at an OpenTelemetry Collector (OTLP over HTTP) and restart it:</p>
<pre><code>tracing:
  enabled: true
  endpoint: http://otel-collector:4318/v1/traces
  sampleRatio: 0.01</code></pre>
<p>Each traced request has one server span with the migration decision on it (<code>v4gw.migration.stage</code>, <code>v4gw.served_by</code>, <code>v4gw.deprecation.action</code>, <code>v4gw.idempotency.outcome</code>) and one client span per upstream call; its access line carries the same <code>traceId</code> and <code>spanId</code>. The repository's <code>docker-compose.yml</code> runs one that prints what it receives (<code>docker compose logs -f otel-collector</code>).</p>
</footer>
<script>`

const HTML_END = `</script>
</body>
</html>
`

function sha256Source(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`
}

/** The headers the page is served with: SPEC 12's policy, hashes of the exact inline text. */
export const MIGRATION_PAGE_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': [
    "default-src 'none'",
    `script-src ${sha256Source(MIGRATION_PAGE_SCRIPT)}`,
    `style-src ${sha256Source(STYLE)}`,
    "connect-src 'self'",
    'img-src data:',
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'"
  ].join('; '),
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // The page is the same for everyone and holds no data, but a stale copy would run a stale script.
  'cache-control': 'no-store'
})

export const MIGRATION_PAGE_HTML = `${HTML_HEAD}${STYLE}${HTML_BODY}${MIGRATION_PAGE_SCRIPT}${HTML_END}`
