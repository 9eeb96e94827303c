/* global fetch, URL */
// The rows of the benchmark (docs/performance.md): what runs, what load it gets, and how its first answer is
// checked. Every row sends the same execution input with the same session token.
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** An opaque session token: neither `key_` nor `sa_`, so the gateway forwards it as a bearer (SPEC 5). */
const SESSION_TOKEN = 'tok_bench_0123456789abcdef0123456789abcdef'
const INPUT = { text: 'summarise the quarterly report for the board', items: [1, 2, 3], options: { language: 'en' } }
const HEADERS = { 'content-type': 'application/json', authorization: `Bearer ${SESSION_TOKEN}` }
const STATE = { policy: 'default', route: 'eu-west' }

const NATIVE_LOAD = { method: 'POST', path: '/v4/execute', headers: HEADERS, body: JSON.stringify({ input: INPUT }) }

/**
 * The Node flags the gateway runs with in production (src/node-flags.ts, built into dist/): the
 * tuned reference gets the same, and builds compared side by side get them on their command line.
 */
export async function productionNodeFlags() {
  const { PRODUCTION_NODE_FLAGS } = await import(new URL('../dist/node-flags.js', import.meta.url).href)
  return [...PRODUCTION_NODE_FLAGS]
}

/**
 * kind: which process is measured. `direct` measures the stub itself; `proxy` a small proxy script
 * (the @fastify/http-proxy reference, the hand-written ceiling); `gateway` the real CLI with `logLevel`
 * and the production Node flags (unless `nodeDefaults`).
 */
export const CANDIDATES = [
  { name: 'direct', kind: 'direct', load: NATIVE_LOAD, check: checkExecution },
  { name: 'fastify-http-proxy', kind: 'proxy', script: 'http-proxy-reference.mjs', load: NATIVE_LOAD, check: checkExecution },
  // Not a goal row: the ceiling of a proxy hop on this machine (see handwritten-proxy.mjs), with the gateway's flags.
  { name: 'handwritten-proxy', kind: 'proxy', script: 'handwritten-proxy.mjs', productionFlags: true, load: NATIVE_LOAD, check: checkExecution },
  // The baseline of the goals: the reference started with the gateway's production Node flags,
  // which help it too (docs/performance.md), so that a ratio compares code, not flags.
  { name: 'fastify-http-proxy-tuned', kind: 'proxy', script: 'http-proxy-reference.mjs', productionFlags: true, load: NATIVE_LOAD, check: checkExecution },
  { name: 'gateway-native', kind: 'gateway', logLevel: 'info', load: NATIVE_LOAD, check: checkExecution },
  { name: 'gateway-native-quiet', kind: 'gateway', logLevel: 'silent', load: NATIVE_LOAD, check: checkExecution },
  // SPEC 17: native passthrough with tracing on (its traceparent rewritten), at the default ratio and at 1.
  { name: 'gateway-native-traced-1pct', kind: 'gateway', logLevel: 'info', tracing: { sampleRatio: 0.01 }, load: NATIVE_LOAD, check: checkExecution },
  { name: 'gateway-native-traced-all', kind: 'gateway', logLevel: 'info', tracing: { sampleRatio: 1 }, load: NATIVE_LOAD, check: checkExecution },
  // SPEC 14 stage legacy: a legacy route streamed to upstream.legacy (the stub answers the legacy
  // path as it answers /v4/execute), as native traffic is: its price over gateway-native is the
  // planner's legacy-route work (route match, client id, stage) on the same stream.
  { name: 'gateway-legacy-stage', kind: 'gateway', logLevel: 'info', legacyStage: true, load: { ...NATIVE_LOAD, path: '/v1/headless/runs' }, check: checkExecution },
  // SPEC 15 stage shadow at 100 %: the same legacy stream, and every request also compared (the
  // stub is the V4 upstream too): what starting a comparison costs the gateway, over the legacy row.
  { name: 'gateway-shadow-stage', kind: 'gateway', logLevel: 'info', legacyStage: true, shadowStage: true, load: { ...NATIVE_LOAD, path: '/v1/headless/runs' }, check: checkExecution },
  // What the production Node flags buy: the same as gateway-native, started without them.
  { name: 'gateway-native-node-defaults', kind: 'gateway', logLevel: 'info', nodeDefaults: true, load: NATIVE_LOAD, check: checkExecution },
  {
    name: 'gateway-execute',
    kind: 'gateway',
    logLevel: 'info',
    load: { method: 'POST', path: '/v1/headless/runs', headers: HEADERS, body: JSON.stringify({ input: INPUT }) },
    check: checkLegacyExecution
  },
  {
    // SPEC 17: the execute row with tracing on at its default ratio, exporting to a collector
    // that discards (bench/otlp-sink.mjs): every request makes its SERVER and CLIENT spans (one in
    // a hundred recorded and exported), and its V4 call a traceparent of its own.
    name: 'gateway-execute-traced-1pct',
    kind: 'gateway',
    logLevel: 'info',
    tracing: { sampleRatio: 0.01 },
    load: { method: 'POST', path: '/v1/headless/runs', headers: HEADERS, body: JSON.stringify({ input: INPUT }) },
    check: checkLegacyExecution
  },
  {
    // The same with every request recorded and exported: the price of tracing everything.
    name: 'gateway-execute-traced-all',
    kind: 'gateway',
    logLevel: 'info',
    tracing: { sampleRatio: 1 },
    load: { method: 'POST', path: '/v1/headless/runs', headers: HEADERS, body: JSON.stringify({ input: INPUT }) },
    check: checkLegacyExecution
  },
  {
    // SPEC 16: the execute row with a fresh idempotency key per request (autocannon writes a new id
    // for `[<id>]` anywhere in the request), so every request claims a key and keeps its answer:
    // against gateway-execute, the price of a claim and a stored result in this replica's memory.
    name: 'gateway-execute-keyed',
    kind: 'gateway',
    logLevel: 'info',
    idempotency: true,
    load: { method: 'POST', path: '/v1/headless/runs', headers: { ...HEADERS, 'idempotency-key': '[<id>]' }, body: JSON.stringify({ input: INPUT }), idReplacement: true },
    check: checkKeyedExecution
  },
  {
    // The same on the shared store: a claim (one Lua SET NX PX) and a stored result (one Lua
    // compare-and-replace) on Redis per request.
    name: 'gateway-execute-keyed-redis',
    kind: 'gateway',
    logLevel: 'info',
    idempotency: true,
    redis: true,
    load: { method: 'POST', path: '/v1/headless/runs', headers: { ...HEADERS, 'idempotency-key': '[<id>]' }, body: JSON.stringify({ input: INPUT }), idReplacement: true },
    check: checkKeyedExecution
  },
  {
    name: 'gateway-session-hit',
    kind: 'gateway',
    logLevel: 'info',
    // One fixed state key: the check below maps it, so every measured call is a hit.
    load: { method: 'POST', path: '/v1/runs/invoke', headers: HEADERS, body: JSON.stringify({ input: INPUT, stateId: 'bench-state-1', state: STATE }) },
    check: checkSessionHit
  },
  {
    name: 'gateway-session-hit-redis',
    kind: 'gateway',
    logLevel: 'info',
    // The session map on Redis (docs/scaling.md): hits are served by the local LRU in front of it.
    redis: true,
    load: { method: 'POST', path: '/v1/runs/invoke', headers: HEADERS, body: JSON.stringify({ input: INPUT, stateId: 'bench-state-redis', state: STATE }) },
    check: checkSessionHit
  },
  {
    name: 'gateway-session-miss',
    kind: 'gateway',
    logLevel: 'info',
    // autocannon replaces `[<id>]` with a fresh id per request: a new state key, so a new session, every call.
    load: { method: 'POST', path: '/v1/runs/invoke', headers: HEADERS, body: JSON.stringify({ input: INPUT, stateId: '[<id>]', state: STATE }), idReplacement: true },
    check: checkSessionMiss
  }
]

export const CANDIDATE_NAMES = CANDIDATES.map((candidate) => candidate.name)

/**
 * The order rows are measured in within a round (reversed every other round). A goal is read on
 * the ratio of a row's window to the nearest window of its partner in the same round (run.mjs):
 * the reference for a goal row, the untraced row for a traced one. Each goal row therefore stands
 * right beside a window of the reference, which is measured once per goal row and round, and each
 * traced row beside its untraced row, so that the machine's drift (±30 % over tens of seconds on
 * the VM of docs/performance.md) moves both windows of a ratio alike. The reference's table row
 * is the median of all its windows.
 */
export const MEASUREMENT_ORDER = [
  'direct',
  'handwritten-proxy',
  'fastify-http-proxy',
  'gateway-native-node-defaults',
  'gateway-native-quiet',
  'gateway-native-traced-1pct',
  'gateway-native',
  'fastify-http-proxy-tuned',
  'gateway-native-traced-all',
  'gateway-legacy-stage',
  'gateway-shadow-stage',
  'gateway-execute-traced-1pct',
  'gateway-execute',
  'fastify-http-proxy-tuned',
  'gateway-execute-traced-all',
  'gateway-execute-keyed',
  'gateway-execute-keyed-redis',
  'gateway-session-hit',
  'fastify-http-proxy-tuned',
  'gateway-session-hit-redis',
  'gateway-session-miss'
]
if (!CANDIDATE_NAMES.every((name) => MEASUREMENT_ORDER.includes(name)) || !MEASUREMENT_ORDER.every((name) => CANDIDATE_NAMES.includes(name))) {
  throw new Error('MEASUREMENT_ORDER must name every row of CANDIDATES, and only those')
}

/**
 * The gateway's config for one run: production defaults except what a benchmark must set
 * (loopback, port 0, the stub as upstream, the row's log level) and a short shutdown grace so that
 * the run stays bounded.
 */
export async function writeGatewayConfig(directory, name, { upstreamUrl, logLevel, redisUrl, idempotency = false, tracing, legacyStage = false, shadowStage = false }) {
  const path = join(directory, `${name}.yaml`)
  const yaml = [
    'listen: { host: 127.0.0.1, port: 0 }',
    'admin: { host: 127.0.0.1, port: 0 }',
    `log: { level: ${logLevel} }`,
    'shutdown: { graceMs: 1000 }',
    ...(redisUrl === undefined ? [] : [`sessions: { store: redis, redis: { url: "${redisUrl}" } }`]),
    // SPEC 17's tracing at the row's ratio, to the sink; its defaults otherwise (batches of 512 or every second).
    ...(tracing === undefined ? [] : [`tracing: { enabled: true, endpoint: "${tracing.endpoint}", sampleRatio: ${tracing.sampleRatio} }`]),
    'tenancy: { default: bench }',
    'tenants:',
    '  bench:',
    // SPEC 14: the stub is the legacy upstream too; every legacy route in stage legacy.
    legacyStage ? `    upstream: { staging: "${upstreamUrl}", target: staging, legacy: "${upstreamUrl}" }` : `    upstream: { staging: "${upstreamUrl}", target: staging }`,
    // SPEC 15: stage shadow compares every request; no comparison is dropped at the bench's concurrency.
    ...(legacyStage ? [shadowStage ? '    migration: { stage: shadow, shadow: { percent: 100, maxInFlight: 1000 } }' : '    migration: { stage: legacy }'] : []),
    ...(idempotency ? ['    legacy: { idempotency: {} }'] : []),
    ''
  ].join('\n')
  await writeFile(path, yaml)
  return path
}

/** A proxy row's script and its argument (the stub to proxy to); it prints `<name> proxy listening on <url>` once ready. */
export function proxyScriptArgs(candidate, stubUrl) {
  return [fileURLToPath(new URL(candidate.script, import.meta.url)), stubUrl]
}

export const PROXY_READY = /^\S+ proxy listening on (\S+)/

/** What bench/load.mjs runs: a row's `load` against `baseUrl`, with the CPU of `measuredPid` read around its window. */
export function loadSpec(load, baseUrl, { generator, connections, warmupSec, durationSec, measuredPid, otherPids }) {
  return {
    url: new URL(load.path, baseUrl).href,
    method: load.method,
    headers: load.headers,
    body: load.body,
    idReplacement: load.idReplacement === true,
    generator,
    connections,
    warmupSec,
    durationSec,
    measuredPid,
    otherPids
  }
}

async function send(baseUrl, load, bodyOverride) {
  const response = await fetch(new URL(load.path, baseUrl), { method: load.method, headers: load.headers, body: bodyOverride ?? load.body })
  const text = await response.text()
  let json
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}

function expect(condition, name, answer, what) {
  if (!condition) throw new Error(`${name}: first answer is wrong (${what}): status ${answer.status}, body ${answer.text.slice(0, 300)}`)
}

async function checkExecution(name, baseUrl, load) {
  const answer = await send(baseUrl, load)
  expect(answer.status === 200, name, answer, 'expected 200')
  expect(answer.json?.output !== undefined && answer.json?.meta?.requestId !== undefined, name, answer, 'expected output and meta.requestId')
}

/**
 * A translated answer, not the same bytes streamed through: SPEC 6 puts the request's id on every
 * legacy answer as `x-request-id` (the stub sends none), and the request's own id is kept.
 */
async function checkLegacyExecution(name, baseUrl, load) {
  const requestId = `bench-check-${name}`
  const answer = await send(baseUrl, { ...load, headers: { ...load.headers, 'x-request-id': requestId } })
  expect(answer.status === 200 && answer.json?.output !== undefined, name, answer, 'expected 200 with output')
  expect(answer.headers.get('x-request-id') === requestId, name, answer, `expected a translated answer carrying x-request-id ${requestId} (SPEC 6)`)
}

/** SPEC 16 is on: a fixed key run twice is executed, then replayed. */
async function checkKeyedExecution(name, baseUrl, load) {
  const keyed = { ...load, headers: { ...load.headers, 'idempotency-key': `bench-check-${name}` } }
  await checkExecution(name, baseUrl, keyed)
  const again = await send(baseUrl, keyed)
  expect(again.status === 200 && again.headers.get('idempotent-replayed') === 'true', name, again, 'expected the stored answer replayed')
}

async function checkSessionHit(name, baseUrl, load) {
  const first = await send(baseUrl, load)
  expect(first.status === 200 && first.json?.output !== undefined, name, first, 'expected 200 with output')
  const sessionId = first.headers.get('x-v4-session-id')
  expect(sessionId !== null, name, first, 'expected x-v4-session-id')
  const second = await send(baseUrl, load)
  expect(second.headers.get('x-v4-session-id') === sessionId, name, second, `expected the mapped session ${sessionId} again (a hit)`)
}

async function checkSessionMiss(name, baseUrl, load) {
  const one = await send(baseUrl, load, load.body.replace('[<id>]', 'check-miss-1'))
  const two = await send(baseUrl, load, load.body.replace('[<id>]', 'check-miss-2'))
  for (const answer of [one, two]) expect(answer.status === 200 && answer.json?.output !== undefined, name, answer, 'expected 200 with output')
  const first = one.headers.get('x-v4-session-id')
  expect(first !== null && first !== two.headers.get('x-v4-session-id'), name, two, 'expected a new session for a new state key')
}
