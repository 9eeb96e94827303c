/**
 * The migration page's script (SPEC 12), as the browser runs it: plain ES2020, no build step, no
 * library. It is served inline and allowed by its hash alone (migration-page.ts), so it must not
 * build code or markup from strings: every value from the gateway reaches the page through
 * `textContent`, `createTextNode` or an attribute set with `setAttribute` (user agents, labels and
 * reasons are client- or operator-controlled text). No `innerHTML`, no `eval`, no inline handlers.
 *
 * The admin token, when the gateway asks for one (a 401), is asked once, kept in `sessionStorage`
 * (gone with the tab; never `localStorage`, a cookie or a URL) and sent as `Authorization: Bearer`.
 */
export const MIGRATION_PAGE_SCRIPT = String.raw`
'use strict';
(function migrationPage() {
  var TOKEN_KEY = 'v4gw.adminToken';
  var SVG = 'http://www.w3.org/2000/svg';
  var STAGES = ['legacy', 'shadow', 'canary', 'translate', 'native-only'];
  var DAY_MS = 86400000;
  /** SPEC 12 keeps 30 UTC days: the chart always spans that many, ending today. */
  var CHART_DAYS = 30;
  var token = readStoredToken();

  var form = document.getElementById('token-form');
  var tokenInput = document.getElementById('token');
  var tokenMessage = document.getElementById('token-message');
  var statusLine = document.getElementById('status');
  var nav = document.getElementById('tenant-nav');
  var main = document.getElementById('tenants');
  var forget = document.getElementById('forget');

  function readStoredToken() {
    try { return sessionStorage.getItem(TOKEN_KEY); } catch (error) { return null; }
  }
  function storeToken(value) {
    token = value;
    try {
      if (value === null) sessionStorage.removeItem(TOKEN_KEY); else sessionStorage.setItem(TOKEN_KEY, value);
    } catch (error) { /* memory only: the token lasts as long as the page */ }
    forget.hidden = value === null;
  }

  /** One element with text; attributes set one by one, never parsed. */
  function el(name, attributes, children) {
    var node = document.createElement(name);
    setAttributes(node, attributes);
    append(node, children);
    return node;
  }
  function svgEl(name, attributes, children) {
    var node = document.createElementNS(SVG, name);
    setAttributes(node, attributes);
    append(node, children);
    return node;
  }
  function setAttributes(node, attributes) {
    if (!attributes) return;
    Object.keys(attributes).forEach(function (key) {
      if (attributes[key] !== null && attributes[key] !== undefined) node.setAttribute(key, String(attributes[key]));
    });
  }
  function append(node, children) {
    if (children === null || children === undefined) return;
    if (!Array.isArray(children)) children = [children];
    children.forEach(function (child) {
      if (child === null || child === undefined) return;
      node.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
    });
  }
  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function isObject(value) { return value !== null && typeof value === 'object' && !Array.isArray(value); }
  function list(value) { return Array.isArray(value) ? value : []; }
  function count(value) { return typeof value === 'number' && isFinite(value) ? value.toLocaleString('en-US') : '–'; }
  /** One decimal; a share that is not 0 (or not 1) never reads as 0 % (or 100 %). */
  function percent(share) {
    var rounded = Math.round(share * 1000) / 10;
    if (rounded === 0 && share > 0) return '< 0.1 %';
    if (rounded === 100 && share < 1) return '> 99.9 %';
    return rounded.toString() + ' %';
  }

  /** An ISO instant as "2026-11-27 14:05 UTC"; anything else as given. */
  function when(iso) {
    if (typeof iso !== 'string') return '–';
    var ms = Date.parse(iso);
    if (isNaN(ms)) return iso;
    return new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC';
  }
  /** "3 min ago", "in 4 d": how far an instant is from now. */
  function relative(iso) {
    if (typeof iso !== 'string' || isNaN(Date.parse(iso))) return '';
    var deltaMs = Date.parse(iso) - Date.now();
    var abs = Math.abs(deltaMs);
    var text = abs < 60000 ? Math.round(abs / 1000) + ' s'
      : abs < 3600000 ? Math.round(abs / 60000) + ' min'
      : abs < DAY_MS ? Math.round(abs / 3600000) + ' h'
      : Math.round(abs / DAY_MS) + ' d';
    return deltaMs < 0 ? text + ' ago' : 'in ' + text;
  }
  function timeCell(iso) {
    if (typeof iso !== 'string') return el('td', { class: 'muted' }, 'never');
    return el('td', null, [el('time', { datetime: iso }, when(iso)), el('span', { class: 'muted' }, ' ' + relative(iso))]);
  }
  function duration(ms) {
    if (ms % DAY_MS === 0) return ms / DAY_MS + ' d';
    if (ms % 3600000 === 0) return ms / 3600000 + ' h';
    return Math.round(ms / 60000) + ' min';
  }
  function stageBadge(stage) {
    var known = STAGES.indexOf(stage) >= 0;
    return el('span', { class: 'stage stage-' + (known ? stage : 'unknown') }, typeof stage === 'string' ? stage : '–');
  }
  /** A table in a box that scrolls sideways, so that a wide one never widens the page. */
  function table(headings, rows, className) {
    return el('div', { class: 'table-box' }, el('table', { class: className || null }, [
      el('thead', null, el('tr', null, headings.map(function (heading) { return el('th', { scope: 'col' }, heading); }))),
      el('tbody', null, rows)
    ]));
  }
  function note(text) { return el('p', { class: 'muted' }, text); }

  /** The token, asked once: the form stays hidden until the gateway answers 401. */
  function askForToken(message) {
    // A load still under way was sent with the token that goes now: its answer is not shown, and
    // the next load is a new request, the same token given again included.
    generation++;
    loading = null;
    storeToken(null);
    clear(main);
    clear(nav);
    shownGeneratedAt = null;
    form.hidden = false;
    tokenMessage.textContent = message;
    statusLine.textContent = 'The admin API needs its token.';
    tokenInput.focus();
  }
  form.addEventListener('submit', function submitToken(event) {
    event.preventDefault();
    var value = tokenInput.value.trim();
    tokenInput.value = '';
    if (value === '') return;
    storeToken(value);
    form.hidden = true;
    load();
  });
  forget.addEventListener('click', function forgetToken() {
    storeToken(null);
    askForToken('Token forgotten.');
  });
  document.getElementById('refresh').addEventListener('click', function refresh() { load(); });

  /** A data call: same origin, the token as a bearer token (never in the URL), nothing cached. */
  function api(path) {
    var headers = { accept: 'application/json' };
    if (token !== null) headers.authorization = 'Bearer ' + token;
    return fetch(path, { headers: headers, cache: 'no-store', credentials: 'omit', redirect: 'error' }).then(function (response) {
      return response.json().then(
        function (body) { return { status: response.status, body: body }; },
        function () { return { status: response.status, body: null }; }
      );
    });
  }
  function errorMessage(answer) {
    var error = answer.body && answer.body.error;
    return 'HTTP ' + answer.status + (error && typeof error.message === 'string' ? ': ' + error.message : '');
  }

  // The load under way, the token it was sent with, and which load is the latest: an answer to
  // an older one (another token, or one forgotten since) is not shown.
  var loading = null;
  var loadingToken = null;
  var generation = 0;
  // When the answer on screen was generated: a failed refresh leaves it, and says how old it is.
  var shownGeneratedAt = null;
  function stillShown() {
    return shownGeneratedAt === null ? '' : ' · still showing the answer generated ' + when(shownGeneratedAt) + ' (' + relative(shownGeneratedAt) + ')';
  }
  function load() {
    if (loading && loadingToken === token) return loading;
    var mine = ++generation;
    loadingToken = token;
    statusLine.textContent = 'Loading…';
    var current = Promise.all([api('/admin/migration'), api('/admin/shadow').catch(function () { return { status: 0, body: null }; })])
      .then(function (answers) {
        if (mine !== generation) return;
        var migration = answers[0];
        if (migration.status === 401) {
          askForToken(token === null ? '' : 'The gateway refused that token: ' + errorMessage(migration));
          return;
        }
        if (migration.status !== 200 || !isObject(migration.body)) {
          statusLine.textContent = '/admin/migration answered ' + errorMessage(migration) + stillShown();
          return;
        }
        form.hidden = true;
        render(migration.body, answers[1]);
      })
      .catch(function (error) { if (mine === generation) statusLine.textContent = 'The admin API could not be reached: ' + String(error && error.message ? error.message : error) + stillShown(); })
      .then(function () { if (loading === current) loading = null; });
    loading = current;
    return current;
  }

  /** shadow: the /admin/shadow answer, whose 404 is a gateway without shadow results. */
  function render(report, shadow) {
    clear(main);
    clear(nav);
    shownGeneratedAt = typeof report.generatedAt === 'string' ? report.generatedAt : null;
    var tenants = isObject(report.tenants) ? report.tenants : {};
    var names = Object.keys(tenants).sort();
    var parts = ['Generated ' + when(report.generatedAt) + ' (' + relative(report.generatedAt) + ')', 'scope ' + (report.scope || '–')];
    if (report.schemaVersion !== 2) parts.push('schemaVersion ' + String(report.schemaVersion) + ': this page reads 2, some parts may be missing');
    if (report.scope === 'local') parts.push('the shared store is not answering: this replica\'s data only');
    // Each answer falls back on its own: the shadow results may be one replica's while the registry is the fleet's.
    else if (shadow.status === 200 && isObject(shadow.body) && shadow.body.scope === 'local') parts.push('shadow results: this replica\'s only (the shared store did not answer for them)');
    statusLine.textContent = parts.join(' · ');
    if (names.length === 0) main.appendChild(note('No tenant has legacy routes.'));
    names.forEach(function (name, index) {
      var anchor = 'tenant-' + index;
      nav.appendChild(el('a', { href: '#' + anchor }, name));
      main.appendChild(renderTenant(name, anchor, isObject(tenants[name]) ? tenants[name] : {}, shadowOf(shadow, name), report.generatedAt));
    });
    var suspended = renderSuspended(isObject(report.suspended) ? report.suspended : {});
    if (suspended) {
      nav.appendChild(el('a', { href: '#suspended' }, 'not applied'));
      main.appendChild(suspended);
    }
  }

  /** Overrides and pauses whose tenant or route the running config no longer has (SPEC 14): not applied, still in force until their until. */
  function renderSuspended(suspended) {
    var overrides = list(suspended.overrides);
    var pauses = list(suspended.brownoutPauses);
    if (overrides.length === 0 && pauses.length === 0) return null;
    var section = el('section', { class: 'suspended', id: 'suspended', 'aria-labelledby': 'suspended-name' });
    section.appendChild(el('h2', { id: 'suspended-name' }, 'Not applied: tenant or route no longer configured'));
    if (overrides.length > 0) {
      section.appendChild(el('h3', null, 'Stage overrides'));
      section.appendChild(table(['tenant', 'scope', 'stage', 'reason', 'until', 'why'], overrides.map(function (override) {
        if (!isObject(override)) return null;
        return el('tr', null, [
          el('td', null, String(override.tenant)),
          el('td', null, typeof override.route === 'string' ? el('code', null, override.route) : 'whole tenant'),
          el('td', null, stageBadge(override.stage)),
          el('td', null, typeof override.reason === 'string' ? override.reason : ''),
          el('td', null, when(override.until)),
          el('td', null, typeof override.suspended === 'string' ? override.suspended : '')
        ]);
      })));
    }
    if (pauses.length > 0) {
      section.appendChild(el('h3', null, 'Brownout pauses'));
      section.appendChild(table(['tenant', 'scope', 'reason', 'until', 'why'], pauses.map(function (pause) {
        if (!isObject(pause)) return null;
        return el('tr', null, [
          el('td', null, String(pause.tenant)),
          el('td', null, typeof pause.route === 'string' ? el('code', null, pause.route) : 'whole tenant'),
          el('td', null, typeof pause.reason === 'string' ? pause.reason : ''),
          el('td', null, when(pause.until)),
          el('td', null, typeof pause.suspended === 'string' ? pause.suspended : '')
        ]);
      })));
    }
    return section;
  }

  function shadowOf(shadow, tenant) {
    if (shadow.status !== 200 && shadow.status !== 404) return { unavailable: errorMessage(shadow) };
    var body = shadow.body;
    if (shadow.status !== 200 || !isObject(body) || !isObject(body.tenants) || !isObject(body.tenants[tenant])) return null;
    var entry = body.tenants[tenant];
    // Each route's results, directly under the tenant or under its routes member.
    return isObject(entry.routes) ? entry.routes : entry;
  }

  function renderTenant(name, anchor, tenant, shadowRoutes, generatedAt) {
    var routes = isObject(tenant.routes) ? tenant.routes : {};
    var routeNames = Object.keys(routes).sort();
    var section = el('section', { class: 'tenant', id: anchor, 'aria-labelledby': anchor + '-name' });
    section.appendChild(el('h2', { id: anchor + '-name' }, [el('span', { class: 'muted' }, 'tenant '), name, ' ', stageBadge(tenant.stage)]));
    var facts = el('dl', { class: 'facts' }, [
      el('dt', null, 'data complete since'), el('dd', null, when(tenant.since)),
      el('dt', null, 'legacy routes'), el('dd', null, String(routeNames.length)),
      el('dt', null, 'brownout pause'), el('dd', null, describePause(tenant.brownoutPause))
    ]);
    section.appendChild(facts);

    section.appendChild(el('h3', null, 'Legacy share per day'));
    section.appendChild(shareChart(list(tenant.legacyShare), name, generatedAt, tenant.since));

    section.appendChild(el('h3', null, 'Next brownout windows'));
    section.appendChild(brownoutTable(routes, routeNames));

    section.appendChild(el('h3', null, 'Stages and overrides'));
    section.appendChild(routeTable(routes, routeNames));
    var overrides = list(tenant.overrides);
    section.appendChild(el('h4', null, 'Stage overrides'));
    section.appendChild(overrides.length === 0 ? note('No stage override.') : overrideTable(overrides));

    section.appendChild(el('h3', null, 'Clients still calling'));
    routeNames.forEach(function (route) { section.appendChild(clientList(route, isObject(routes[route]) ? routes[route] : {}, tenant.since)); });

    section.appendChild(el('h3', null, 'Shadow verdicts'));
    section.appendChild(shadowTable(shadowRoutes));
    return section;
  }

  function describePause(pause) {
    if (!isObject(pause)) return 'none';
    return 'paused until ' + when(pause.until) + (pause.reason ? ': ' + pause.reason : '');
  }

  function dayOf(ms) { return new Date(ms).toISOString().slice(0, 10); }

  /**
   * The legacy share per UTC day as bars (inline SVG) over the last 30 days: a day since the data
   * is complete without traffic is an empty baseline, a day before it is left blank (unknown).
   */
  function shareChart(days, tenant, generatedAt, since) {
    var byDay = {};
    days.forEach(function (day) { if (isObject(day) && typeof day.day === 'string') byDay[day.day] = day; });
    var known = Object.keys(byDay).sort();
    if (known.length === 0) return note('No legacy or native request recorded yet.');
    var lastMs = Date.parse(known[known.length - 1] + 'T00:00:00Z');
    var todayMs = Date.parse(dayOf(isNaN(Date.parse(generatedAt)) ? Date.now() : Date.parse(generatedAt)) + 'T00:00:00Z');
    if (!isNaN(todayMs) && todayMs > lastMs) lastMs = todayMs;
    var sinceDay = typeof since === 'string' && !isNaN(Date.parse(since)) ? dayOf(Date.parse(since)) : known[0];
    var span = [];
    for (var ms = lastMs - (CHART_DAYS - 1) * DAY_MS; ms <= lastMs; ms += DAY_MS) span.push(dayOf(ms));
    var width = 720, height = 200, left = 44, right = 8, top = 10, bottom = 28;
    var plotWidth = width - left - right, plotHeight = height - top - bottom;
    var slot = plotWidth / Math.max(span.length, 1);
    var last = byDay[known[known.length - 1]];
    var svg = svgEl('svg', { class: 'chart', viewBox: '0 0 ' + width + ' ' + height, role: 'img', 'aria-label': 'Legacy share per day for tenant ' + tenant });
    svg.appendChild(svgEl('title', null, 'Legacy share per day, tenant ' + tenant));
    [0, 0.5, 1].forEach(function (level) {
      var y = top + plotHeight * (1 - level);
      svg.appendChild(svgEl('line', { class: 'grid', x1: left, x2: width - right, y1: y, y2: y }));
      svg.appendChild(svgEl('text', { class: 'axis', x: left - 6, y: y + 4, 'text-anchor': 'end' }, Math.round(level * 100) + '%'));
    });
    span.forEach(function (day, index) {
      var entry = byDay[day];
      var legacy = entry && typeof entry.legacy === 'number' ? entry.legacy : 0;
      var native = entry && typeof entry.native === 'number' ? entry.native : 0;
      var total = legacy + native;
      var x = left + index * slot + slot * 0.15;
      var barWidth = Math.max(slot * 0.7, 1);
      if (total === 0) {
        if (day < sinceDay) return;
        svg.appendChild(svgEl('rect', { class: 'bar-empty', x: x, y: top + plotHeight - 1, width: barWidth, height: 1 }, svgEl('title', null, day + ': no requests')));
        return;
      }
      var share = legacy / total;
      var tip = svgEl('title', null, day + ': ' + percent(share) + ' legacy (' + count(legacy) + ' legacy, ' + count(native) + ' native)');
      // A day with requests and none legacy is the goal: a mark of its own, not a bar of height 0.
      if (share === 0) {
        svg.appendChild(svgEl('rect', { class: 'bar-zero', x: x, y: top + plotHeight - 2, width: barWidth, height: 2 }, tip));
        return;
      }
      var barHeight = Math.max(plotHeight * share, 1);
      svg.appendChild(svgEl('rect', { class: 'bar', x: x, y: top + plotHeight - barHeight, width: barWidth, height: barHeight }, tip));
    });
    [0, span.length - 1].forEach(function (index) {
      svg.appendChild(svgEl('text', { class: 'axis', x: index === 0 ? left : width - right, y: height - 8, 'text-anchor': index === 0 ? 'start' : 'end' }, span[index]));
    });
    var lastTotal = (last.legacy || 0) + (last.native || 0);
    var caption = 'On ' + last.day + ': ' + (lastTotal === 0 ? 'no requests' : percent((last.legacy || 0) / lastTotal) + ' legacy, ' + count(last.legacy || 0) + ' legacy and ' + count(last.native || 0) + ' native requests') + '.';
    return el('figure', { class: 'chart-box' }, [svg, el('figcaption', { class: 'muted' }, caption)]);
  }

  /** Every route's next windows, one row per window with the routes it covers. */
  function brownoutTable(routes, routeNames) {
    var windows = {};
    var deprecated = 0;
    routeNames.forEach(function (route) {
      var deprecation = isObject(routes[route]) ? routes[route].deprecation : null;
      if (!isObject(deprecation)) return;
      deprecated++;
      list(deprecation.nextBrownouts).forEach(function (window) {
        if (!isObject(window)) return;
        var key = window.start + ' ' + window.end;
        if (!windows[key]) windows[key] = { start: window.start, end: window.end, routes: [] };
        windows[key].routes.push(route);
      });
    });
    var keys = Object.keys(windows).sort(function (a, b) { return Date.parse(windows[a].start) - Date.parse(windows[b].start); });
    if (keys.length === 0) return note(deprecated === 0 ? 'No legacy route is deprecated.' : 'No brownout window is scheduled.');
    return table(['starts', 'ends', 'lasts', 'routes'], keys.map(function (key) {
      var window = windows[key];
      var lasts = Date.parse(window.end) - Date.parse(window.start);
      return el('tr', null, [timeCell(window.start), el('td', null, when(window.end)), el('td', null, isNaN(lasts) ? '–' : duration(lasts)),
        el('td', null, window.routes.length === routeNames.length ? 'all routes' : window.routes.join(', '))]);
    }));
  }

  function routeTable(routes, routeNames) {
    if (routeNames.length === 0) return note('No legacy route.');
    return table(['route', 'stage', 'canary', 'requests', 'last seen', 'last non-exempt', 'clients', 'deprecation', 'brownout pause'], routeNames.map(function (route) {
      var entry = isObject(routes[route]) ? routes[route] : {};
      var canary = isObject(entry.canary) ? entry.canary.percent + ' %' + (list(entry.canary.allow).length ? ', allow ' + list(entry.canary.allow).length : '') + (list(entry.canary.deny).length ? ', deny ' + list(entry.canary.deny).length : '') : '–';
      var deprecation = isObject(entry.deprecation)
        ? 'since ' + when(entry.deprecation.date) + (entry.deprecation.sunset ? '; sunset ' + when(entry.deprecation.sunset) + ' (' + (entry.deprecation.afterSunset || 'serve') + ')' : '')
        : 'not deprecated';
      return el('tr', null, [
        el('th', { scope: 'row' }, el('code', null, route)),
        el('td', null, [stageBadge(entry.stage), el('span', { class: 'muted' }, entry.stageSource === 'override' ? ' override' : ' config')]),
        el('td', null, canary),
        el('td', { class: 'number' }, count(entry.requests)),
        timeCell(entry.lastSeen),
        timeCell(entry.lastSeenNonExempt),
        el('td', { class: 'number' }, count(entry.distinctClients)),
        el('td', null, deprecation),
        el('td', null, describePause(entry.brownoutPause))
      ]);
    }), 'routes');
  }

  function overrideTable(overrides) {
    return table(['scope', 'stage', 'reason', 'set', 'until', 'applied'], overrides.map(function (override) {
      if (!isObject(override)) return null;
      return el('tr', null, [
        el('td', null, override.route ? el('code', null, override.route) : 'whole tenant'),
        el('td', null, stageBadge(override.stage)),
        el('td', null, typeof override.reason === 'string' ? override.reason : ''),
        timeCell(override.setAt),
        el('td', null, when(override.until)),
        el('td', null, override.suspended ? 'suspended: ' + override.suspended : 'yes')
      ]);
    }));
  }

  function clientList(route, entry, since) {
    var clients = list(entry.clients);
    var listed = typeof entry.clientsListed === 'number' ? entry.clientsListed : clients.length;
    var summary = el('summary', null, [el('code', null, route), ' ',
      el('span', { class: 'muted' }, count(entry.distinctClients) + ' distinct client(s), ' + count(listed) + ' listed' + (entry.clientsEvicted ? ', ' + count(entry.clientsEvicted) + ' evicted' : ''))]);
    var details = el('details', { class: 'clients', open: clients.length > 0 && clients.length <= 50 ? '' : null }, summary);
    if (clients.length === 0) {
      // Requests without a listed client: their records were evicted (clients.maxPerRoute,
      // clients.maxTotal). Never "no client has called", which reads as safe to retire.
      if (typeof entry.requests === 'number' && entry.requests > 0) {
        details.appendChild(note('No client is listed, yet the route has ' + count(entry.requests) + ' request(s)' + (typeof entry.lastSeen === 'string' ? ', the last ' + when(entry.lastSeen) : '') + ': the clients that called it were evicted from the registry (clients.maxPerRoute, clients.maxTotal). It is still called.'));
        return details;
      }
      details.appendChild(note((typeof since === 'string' ? 'No client has called this route since ' + when(since) + '.' : 'No client has called this route.')));
      return details;
    }
    if (typeof entry.distinctClients === 'number' && entry.distinctClients > clients.length) {
      details.appendChild(note(count(entry.distinctClients - clients.length) + ' more client(s) are not listed here: the most recent ' + count(clients.length) + ' are. v4gw report lists up to 10,000.'));
    }
    details.appendChild(table(['client', 'id', 'last seen', 'user agent', 'requests', 'first seen', 'last brownout', 'exempt until'], clients.map(function (client) {
      if (!isObject(client)) return null;
      var label = client.label ? [client.label, client.owner ? el('span', { class: 'muted' }, ' (' + client.owner + ')') : null] : el('span', { class: 'muted' }, 'unlabelled');
      return el('tr', { class: 'client' }, [
        el('td', null, label),
        el('td', null, el('code', { class: 'client-id' }, typeof client.clientId === 'string' ? client.clientId : '–')),
        timeCell(client.lastSeen),
        el('td', { class: 'user-agent' }, typeof client.userAgent === 'string' && client.userAgent !== '' ? client.userAgent : el('span', { class: 'muted' }, 'none sent')),
        el('td', { class: 'number' }, count(client.requests)),
        el('td', null, when(client.firstSeen)),
        el('td', null, client.lastBrownout ? when(client.lastBrownout) : '–'),
        el('td', null, client.exemptUntil ? when(client.exemptUntil) : '–')
      ]);
    }), 'client-table'));
    return details;
  }

  /** SPEC 15's verdict on a route's counts: matches and mismatches, the rest being no verdict. */
  function verdictOf(counts) {
    var compared = (counts.matches || 0) + (counts.mismatches || 0);
    if (compared === 0) return { text: 'nothing compared', className: null };
    if (!counts.mismatches) return { text: 'all ' + count(compared) + ' match', className: 'good' };
    return { text: percent(counts.mismatches / compared) + ' mismatch', className: 'bad' };
  }

  function shadowTable(routes) {
    if (routes && typeof routes.unavailable === 'string') return note('Shadow results unavailable: /admin/shadow answered ' + routes.unavailable + '.');
    // A route with any count: one whose requests were all skipped or dropped shows those counts too.
    var names = routes ? Object.keys(routes).filter(function (route) {
      var entry = routes[route];
      return isObject(entry) && ['comparisons', 'skipped', 'dropped', 'primaryErrors', 'candidateErrors', 'abandoned'].some(function (key) { return entry[key] > 0; });
    }).sort() : [];
    if (names.length === 0) return note('No shadow comparisons.');
    return table(['route', 'verdict', 'last 24 h', 'comparisons', 'matches', 'mismatches', 'candidate errors', 'primary errors', 'dropped', 'skipped', 'top differing pointers'], names.map(function (route) {
      var entry = routes[route];
      var verdict = verdictOf(entry);
      var recent = isObject(entry.last24h) ? verdictOf(entry.last24h) : { text: '–', className: null };
      var pointers = list(entry.topPointers).slice(0, 5).map(function (item) { return isObject(item) ? item.pointer + ' ×' + item.count : ''; }).join(', ');
      return el('tr', null, [
        el('th', { scope: 'row' }, el('code', null, route)),
        el('td', { class: verdict.className }, verdict.text),
        el('td', { class: recent.className }, recent.text),
        el('td', { class: 'number' }, count(entry.comparisons)),
        el('td', { class: 'number' }, count(entry.matches)),
        el('td', { class: 'number' }, count(entry.mismatches)),
        el('td', { class: 'number' }, count(entry.candidateErrors)),
        el('td', { class: 'number' }, count(entry.primaryErrors)),
        el('td', { class: 'number' }, count(entry.dropped)),
        el('td', { class: 'number' }, count(entry.skipped)),
        el('td', null, pointers === '' ? '–' : pointers)
      ]);
    }));
  }

  forget.hidden = token === null;
  load();
})();
`
