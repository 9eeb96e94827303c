/* global process, console, fetch, URL, setTimeout */
// npm run bench [-- --quick] [-- --json FILE]: the gateway side by side with the alternatives a
// user would pick, as ratios (docs/performance.md). Loopback only, bounded in time, and it ends only the
// processes it started, by PID. Uses the built gateway (dist/), so `npm run bench` builds first.
//
// Flags: --quick (1 round, 1 s warm-up, 4 s per row: about 1.5 minutes); full: 5 rounds x (2 s + 6 s), --json FILE,
//        --rounds N, --duration S, --warmup S, --connections N, --only a,b,c, --no-memory,
//        --remeasures N (how often a window disturbed by other work is measured again; default 2,
//        0 for a smoke run that only checks the machinery, as test/integration/bench-run.test.ts does),
//        --stat median|best (per metric over rounds; default median; best = highest req/s,
//        lowest latency and CPU, useful on a machine where other work only ever slows a row),
//        --profile (writes a V8 CPU profile of every measured process to .bench-out/profiles/;
//        profiling slows them, so numbers of such a run are not comparable)
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { CANDIDATES, CANDIDATE_NAMES, MEASUREMENT_ORDER, loadSpec, PROXY_READY, productionNodeFlags, proxyScriptArgs, writeGatewayConfig } from './candidates.mjs'
import { createServer } from 'node:net'
import { isBrokenWindow, measurementPlan, pairedRatios, verdict } from './paired-windows.mjs'
import { clockTicksPerSecond, detectPinning, measuredEnv, pinSelf, runNode, startNode, stopAll, stopOnSignals, stopProcess } from './processes.mjs'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
const ROOT = dirname(BENCH_DIR)
const CLI = join(ROOT, 'dist', 'cli.js')
const GATEWAY_NODE_FLAGS = await productionNodeFlags()
const PROFILE_DIR = join(ROOT, '.bench-out', 'profiles')
/** The measured process (proxy, gateway, or the stub for `direct`) gets this core to itself. */
const MEASURED_CORE = 1
/** The load generator, the stub (except for `direct`) and this runner share this one. */
const LOAD_CORE = 0

/**
 * Each goal row against the reference started with the same Node flags as the gateway (like for
 * like, docs/performance.md): the plain reference is information only.
 */
const BASELINE = 'fastify-http-proxy-tuned'
const GOALS = [
  { row: 'gateway-native', minRatio: 1.25 },
  { row: 'gateway-execute', minRatio: 1.1 },
  { row: 'gateway-session-hit', minRatio: 1.0 },
  { row: 'gateway-session-hit-redis', minRatio: 0.95 }
]
/**
 * SPEC 17, issue 30: tracing on at the default ratio costs at most 5 % of the untraced row's req/s,
 * tracing everything at most 15 % (each exporting to a collector that discards).
 */
const TRACING_GOALS = [
  { row: 'gateway-native-traced-1pct', untraced: 'gateway-native', minRatio: 0.95 },
  { row: 'gateway-native-traced-all', untraced: 'gateway-native', minRatio: 0.85 },
  { row: 'gateway-execute-traced-1pct', untraced: 'gateway-execute', minRatio: 0.95 },
  { row: 'gateway-execute-traced-all', untraced: 'gateway-execute', minRatio: 0.85 }
]
/** The access log costs what a log line costs: native with it on, in CPU per request, over native with it off. */
const MAX_ACCESS_LOG_CPU_RATIO = 1.1
const MAX_P99_OVER_P50 = 3
const MAX_SESSION_BYTES_PER_ENTRY = 500
// A window in which the machine spent more than this share of a core outside the benchmark (other
// processes, or the hypervisor's steal) is measured again, at most --remeasures times; the
// sample with the least other work is kept.
const MAX_OTHER_WORK_PCT = 10

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    json: { type: 'string' },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string', default: '50' },
    only: { type: 'string' },
    'no-memory': { type: 'boolean', default: false },
    remeasures: { type: 'string', default: '2' },
    profile: { type: 'boolean', default: false },
    stat: { type: 'string', default: 'median' },
    load: { type: 'string' }
  }
})

// autocannon by default (the recorded runs); --load wrk when wrk is installed.
const hasWrk = spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined

const settings = {
  rounds: Number(flags.rounds ?? (flags.quick ? 1 : 5)),
  durationSec: Number(flags.duration ?? (flags.quick ? 4 : 6)),
  warmupSec: Number(flags.warmup ?? (flags.quick ? 1 : 2)),
  connections: Number(flags.connections),
  remeasures: Number(flags.remeasures),
  pipelining: 1,
  generator: flags.load ?? 'autocannon'
}
if (settings.generator !== 'wrk' && settings.generator !== 'autocannon') throw new Error('--load is wrk or autocannon')
if (!Number.isInteger(settings.remeasures) || settings.remeasures < 0) throw new Error('--remeasures is a whole number, 0 or more')
if (settings.generator === 'wrk' && !hasWrk) throw new Error('--load wrk: wrk is not installed (apt-get install -y wrk)')
const hasRedis = spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0
if (!hasRedis) console.log('note: redis-server is not installed (apt-get install -y redis-server): the Redis rows (gateway-session-hit-redis, gateway-execute-keyed-redis) are skipped')
const selected = (flags.only === undefined ? CANDIDATES : CANDIDATES.filter((candidate) => flags.only.split(',').includes(candidate.name))).filter(
  (candidate) => hasRedis || candidate.redis !== true
)
if (flags.stat !== 'median' && flags.stat !== 'best') throw new Error('--stat is median or best')
if (selected.length === 0) throw new Error(`--only matched nothing; rows: ${CANDIDATE_NAMES.join(', ')}`)
// Measured in MEASUREMENT_ORDER (each goal row beside a window of the reference), shown in
// CANDIDATES order. A row named twice in a row once the selection is applied is measured once.
const measurementOrder = measurementPlan(MEASUREMENT_ORDER, selected)
if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first (npm run bench does)`)

const pin = detectPinning([MEASURED_CORE, LOAD_CORE])
const ticksPerSecond = clockTicksPerSecond()
const startedAt = Date.now()
const loadAtStart = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
let workDir

stopOnSignals('benchmark', () => workDir)

/** What the numbers were measured on, for the report and docs/performance.md. */
function describeMachine() {
  const cpuModel = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.+)$/m)?.[1] ?? cpus()[0]?.model ?? 'unknown'
  const version = (name) => JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')).version
  const packages = Object.fromEntries(['fastify', '@fastify/http-proxy', '@fastify/reply-from', 'undici', 'autocannon'].map((name) => [name, version(name)]))
  // The build is of the working tree: say which commit, and whether it had local changes.
  const git = (...args) => spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' }).stdout?.trim() ?? ''
  const revision = `${git('rev-parse', '--short', 'HEAD') || 'unknown'}${git('status', '--porcelain', '--', 'src') === '' ? '' : ' + uncommitted changes in src/'}`
  return { cpus: cpus().length, cpuModel, node: process.version, packages, revision, loadAverage: readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ') }
}

function log(message) {
  console.error(`[bench ${((Date.now() - startedAt) / 1000).toFixed(1).padStart(5)}s] ${message}`)
}

/** Node flags of a measured process: a CPU profile named after the row when --profile is given. */
function profileFlags(name) {
  return flags.profile ? ['--cpu-prof', '--cpu-prof-dir', PROFILE_DIR, '--cpu-prof-name', `${name}-${Date.now()}.cpuprofile`] : []
}

function startStub(core, measured) {
  const args = [...(measured ? profileFlags('direct') : []), join(BENCH_DIR, 'stub-upstream.mjs')]
  return startNode({ name: 'stub', args, core, pin, ready: /^stub listening on (\S+)/ })
}

/** Starts what the row measures; resolves with its handle and the URL the load goes to. */
async function startMeasured(candidate, stub, stubUrl, redisUrl, sinkUrl) {
  if (candidate.kind === 'direct') return { handle: stub, url: stubUrl }
  if (candidate.kind === 'proxy') {
    const { handle, match } = await startNode({
      name: candidate.name,
      args: [...(candidate.productionFlags ? GATEWAY_NODE_FLAGS : []), ...profileFlags(candidate.name), ...proxyScriptArgs(candidate, stubUrl)],
      core: MEASURED_CORE,
      pin,
      ready: PROXY_READY,
      env: measuredEnv()
    })
    return { handle, url: match[1] }
  }
  const config = await writeGatewayConfig(workDir, candidate.name, {
    upstreamUrl: stubUrl,
    logLevel: candidate.logLevel,
    redisUrl,
    idempotency: candidate.idempotency === true,
    legacyStage: candidate.legacyStage === true,
    shadowStage: candidate.shadowStage === true,
    tracing: candidate.tracing === undefined ? undefined : { ...candidate.tracing, endpoint: sinkUrl }
  })
  // The real CLI started plainly, `node dist/cli.js --config …`: it gives itself the production
  // Node flags (src/node-flags.ts), as a user's start would; the node-defaults row turns that off.
  // Its JSON log (stdout, with the ready line) goes to a file, as to a container's log driver,
  // rather than through a pipe this runner would have to read.
  const { handle, match } = await startNode({
    name: candidate.name,
    // Profiled, it gets the flags itself: a launcher (Node without process.execve) would write its
    // own, idle profile over its child's, under the same name.
    args: [...(flags.profile && !candidate.nodeDefaults ? GATEWAY_NODE_FLAGS : []), ...profileFlags(candidate.name), CLI, '--config', config],
    core: MEASURED_CORE,
    pin,
    ready: /^v4gw listening on (\S+) \(admin (\S+)\) pid (\d+)/,
    env: measuredEnv({ NODE_ENV: 'production', ...(candidate.nodeDefaults ? { V4GW_NODE_FLAGS: 'off' } : {}) }),
    stdoutFile: join(workDir, `${candidate.name}.log`)
  })
  // On Node without process.execve the gateway is the launcher's child: measure the one that serves.
  return { handle, url: match[1], adminUrl: match[2], servingPid: Number(match[3]) }
}

/** One row, once: fresh stub and fresh measured process, checked, warmed, loaded, stopped. */
async function measureOnce(candidate) {
  const stubCore = candidate.kind === 'direct' ? MEASURED_CORE : LOAD_CORE
  const { handle: stub, match } = await startStub(stubCore, candidate.kind === 'direct')
  let measured
  let redis
  let sink
  try {
    if (candidate.redis) redis = await startRedis()
    // The collector of a traced row, on the load core with the stub: it discards what it gets.
    if (candidate.tracing !== undefined) sink = await startNode({ name: 'otlp-sink', args: [join(BENCH_DIR, 'otlp-sink.mjs')], core: LOAD_CORE, pin, ready: /^otlp sink listening on (\S+)/ })
    measured = await startMeasured(candidate, stub, match[1], redis?.url, sink?.match[1])
    await candidate.check(candidate.name, measured.url, candidate.load)
    // A traced row's exports so far (the check's span may be among them): the run's must come on top.
    const exportsBefore = sink === undefined ? 0 : await sinkExports(sink)
    const spec = loadSpec(candidate.load, measured.url, {
      generator: settings.generator,
      connections: settings.connections,
      warmupSec: settings.warmupSec,
      durationSec: settings.durationSec,
      measuredPid: measured.servingPid ?? measured.handle.pid,
      // The row's own store works for it: its CPU is the row's cost, not another process's noise.
      otherPids: [stub.pid, process.pid, ...(sink === undefined ? [] : [sink.handle.pid]), ...(redis === undefined ? [] : [redis.handle.pid])]
    })
    const output = await runNode({
      name: `load(${candidate.name})`,
      args: [join(BENCH_DIR, 'load.mjs'), JSON.stringify(spec)],
      core: LOAD_CORE,
      pin,
      timeoutMs: (settings.warmupSec + settings.durationSec + 30) * 1000
    })
    if (measured.handle.exited) throw new Error(`${candidate.name}: the measured process exited during the run`)
    // A traced row is judged on the price of its spans: they must have reached the collector (a
    // batch a second, or sooner when full; a very short window may end before the first).
    if (sink !== undefined) {
      const exported = async () => (await sinkExports(sink)) > exportsBefore
      const deadline = Date.now() + 3_000
      while (!(await exported())) {
        if (Date.now() > deadline) throw new Error(`${candidate.name}: no span reached the collector during the run`)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
    // Dropping a span is cheaper than exporting it: a window that dropped some measured less than
    // the row claims (SPEC 17's queue is bounded, tracing.maxQueueSpans); its verdict says so.
    const droppedSpans = sink === undefined ? 0 : await spansDropped(measured.adminUrl)
    const sample = JSON.parse(output.trim().split('\n').at(-1))
    const completed = sample.ok + sample.non2xx
    return {
      rps: sample.rps,
      p50Ms: sample.p50Ms,
      p99Ms: sample.p99Ms,
      cpuUsPerReq: completed === 0 ? NaN : (sample.cpuTicks * 1e6) / ticksPerSecond / completed,
      // How much of one core the measured process used in the window: under ~90 % the load side set the pace.
      busyPct: (100 * sample.cpuTicks) / ticksPerSecond / sample.elapsedSec,
      rssMiB: sample.rssMiB,
      // Other work on the machine during the window, in % of one core; tick counters are coarse,
      // so small negative values are rounding and read as 0.
      foreignCpuPct: Math.max(0, (100 * sample.foreignTicks) / ticksPerSecond / sample.elapsedSec),
      failures: sample.non2xx + sample.errors + sample.timeouts + (sample.stalled ?? 0),
      completed,
      droppedSpans
    }
  } finally {
    if (measured !== undefined && measured.handle !== stub) await stopProcess(measured.handle)
    await stopProcess(stub)
    if (redis !== undefined) await stopProcess(redis.handle)
    if (sink !== undefined) await stopProcess(sink.handle)
  }
}

/** The gateway's `v4gw_trace_spans_dropped_total`, all reasons, from its admin listener's `/metrics`. */
async function spansDropped(adminUrl) {
  const text = await (await fetch(new URL('/metrics', adminUrl))).text()
  let sum = 0
  for (const line of text.split('\n')) if (line.startsWith('v4gw_trace_spans_dropped_total')) sum += Number(line.slice(line.lastIndexOf(' ') + 1))
  return sum
}

/** How many exports the collector stand-in has taken (bench/otlp-sink.mjs `GET /stats`). */
async function sinkExports(sink) {
  return (await (await fetch(new URL('/stats', sink.match[1]))).json()).exports
}

/** A throwaway redis-server on a free loopback port, on the load core (the gateway's store, not the measured process). */
async function startRedis() {
  const port = await freePort()
  const { handle } = await startNode({
    name: 'redis-server',
    executable: 'redis-server',
    args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    core: LOAD_CORE,
    pin,
    ready: /Ready to accept connections/
  })
  return { handle, url: `redis://127.0.0.1:${port}` }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

function median(values) {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b)
  if (sorted.length === 0) return NaN
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

async function measureMemory() {
  const output = await runNode({ name: 'memory', args: ['--expose-gc', join(BENCH_DIR, 'memory.mjs'), '100000'], core: LOAD_CORE, pin: false, timeoutMs: 60_000 })
  return JSON.parse(output.trim().split('\n').at(-1))
}

const fixed = (digits) => (value) => (Number.isFinite(value) ? value.toFixed(digits) : 'n/a')
const ratio = (value, base) => (Number.isFinite(value) && base > 0 ? `${(value / base).toFixed(2)}x` : 'n/a')

function printTable(rows) {
  const reference = rows[BASELINE]?.rps
  const direct = rows.direct?.rps
  const header = ['row', 'req/s', 'p50 ms', 'p99 ms', 'CPU µs/req', 'RSS MiB', 'vs tuned ref', 'vs direct', 'failed', 'other work']
  const lines = Object.entries(rows).map(([name, row]) => [
    name,
    fixed(0)(row.rps),
    fixed(2)(row.p50Ms),
    fixed(2)(row.p99Ms),
    fixed(1)(row.cpuUsPerReq),
    fixed(0)(row.rssMiB),
    ratio(row.rps, reference),
    ratio(row.rps, direct),
    String(row.failures),
    `${fixed(0)(row.foreignCpuPct)}%`
  ])
  const widths = header.map((title, column) => Math.max(title.length, ...lines.map((line) => line[column].length)))
  const format = (cells) => `| ${cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join(' | ')} |`
  console.log(format(header))
  console.log(`|${widths.map((width, column) => (column === 0 ? `${'-'.repeat(width + 1)}-` : `${'-'.repeat(width + 1)}:`)).join('|')}|`)
  for (const line of lines) console.log(format(line))
}

const rpsOf = (sample) => sample.rps
const cpuOf = (sample) => sample.cpuUsPerReq

/** A goal read within rounds or windows: the median of the ratios, and their range for the goal line. */
function readWithin(ratios, unit) {
  const sorted = [...ratios].sort((a, b) => a - b)
  return { value: median(sorted), spread: sorted.length > 1 ? `per ${unit} ${sorted[0].toFixed(2)}–${sorted.at(-1).toFixed(2)}x; ` : '' }
}

/** The goals (docs/performance.md), as PASS/FAIL lines. Informational: they never change the exit code. */
function goalLines(rows, samples, memory) {
  const lines = []
  const reference = rows[BASELINE]?.rps
  for (const goal of GOALS) {
    const row = rows[goal.row]
    if (row === undefined || reference === undefined) continue
    // Read within each round, on the row's window and the reference's beside it: the machine
    // drifts between windows a minute apart. The ratio of the medians is printed beside it.
    const { value, spread } = readWithin(pairedRatios(samples, goal.row, BASELINE, rpsOf), 'round')
    const { word, note } = verdict(value >= goal.minRatio, value, [goal.row, BASELINE], samples)
    lines.push(
      `${word} ${goal.row} req/s = ${fixed(2)(value)}x ${BASELINE}, the median of the within-round ratios ` +
        `(goal >= ${goal.minRatio}x; ${spread}ratio of the ${flags.stat === 'best' ? 'bests' : 'medians'} ${ratio(row.rps, reference)})${note}`
    )
  }
  for (const goal of TRACING_GOALS) {
    if (rows[goal.row] === undefined || rows[goal.untraced] === undefined) continue
    // Within each round, as the goals above: the traced row and its untraced one stand side by side (MEASUREMENT_ORDER).
    const { value, spread } = readWithin(pairedRatios(samples, goal.row, goal.untraced, rpsOf), 'round')
    const judged = verdict(value >= goal.minRatio, value, [goal.row, goal.untraced], samples)
    const dropped = samples[goal.row].reduce((sum, sample) => sum + sample.droppedSpans, 0)
    const { word, note } = dropped > 0 ? { word: 'FAIL', note: `${judged.note} [${dropped} span(s) dropped, not exported: not the price of tracing]` } : judged
    lines.push(
      `${word} ${goal.row} req/s = ${fixed(2)(value)}x ${goal.untraced} (tracing off), the median of the within-round ratios ` +
        `(goal >= ${goal.minRatio}x; ${spread}CPU ${fixed(1)(rows[goal.row].cpuUsPerReq)} over ${fixed(1)(rows[goal.untraced].cpuUsPerReq)} µs/req)${note}`
    )
  }
  const legacyRow = rows['gateway-legacy-stage']
  const shadowRow = rows['gateway-shadow-stage']
  if (legacyRow !== undefined && shadowRow !== undefined) {
    // SPEC 15, issue 29 point 8: reported, no goal. The comparison's V4 call and compare run on the
    // gateway's core after each answer, so the CPU per request is what a comparison costs.
    const { value, spread } = readWithin(pairedRatios(samples, 'gateway-shadow-stage', 'gateway-legacy-stage', cpuOf), 'round')
    lines.push(
      `INFO gateway-shadow-stage CPU per request = ${value.toFixed(2)}x gateway-legacy-stage (stage shadow at 100 % over stage legacy), the median of the within-round ratios ` +
        `(${spread}${shadowRow.cpuUsPerReq.toFixed(1)} over ${legacyRow.cpuUsPerReq.toFixed(1)} µs/req; req/s ${shadowRow.rps.toFixed(0)} and ${legacyRow.rps.toFixed(0)})`
    )
  }
  const logged = rows['gateway-native']
  const quiet = rows['gateway-native-quiet']
  if (logged !== undefined && quiet !== undefined) {
    const { value, spread } = readWithin(pairedRatios(samples, 'gateway-native', 'gateway-native-quiet', cpuOf), 'round')
    const { word, note } = verdict(value <= MAX_ACCESS_LOG_CPU_RATIO, value, ['gateway-native', 'gateway-native-quiet'], samples)
    lines.push(
      `${word} gateway-native CPU per request = ${fixed(2)(value)}x gateway-native-quiet (log off), the median of the within-round ratios ` +
        `(goal <= ${MAX_ACCESS_LOG_CPU_RATIO}x; ${spread}${fixed(1)(logged.cpuUsPerReq)} over ${fixed(1)(quiet.cpuUsPerReq)} µs/req)${note}`
    )
  }
  for (const [name, row] of Object.entries(rows)) {
    if (!name.startsWith('gateway-')) continue
    // Read within each window, as the throughput goals are read within each round: a window's
    // p99 and p50 saw the same machine, while the median p99 and the median p50 may come from
    // windows minutes apart. The ratio of the medians is printed beside it.
    const { value, spread } = readWithin(
      samples[name].map((sample) => sample.p99Ms / sample.p50Ms),
      'window'
    )
    const { word, note } = verdict(value <= MAX_P99_OVER_P50, value, [name], samples)
    lines.push(
      `${word} ${name} p99 = ${fixed(2)(value)}x its p50, the median of the within-window ratios ` +
        `(goal <= ${MAX_P99_OVER_P50}x; ${spread}p99 ${fixed(2)(row.p99Ms)} ms over p50 ${fixed(2)(row.p50Ms)} ms = ${ratio(row.p99Ms, row.p50Ms)})${note}` +
        // The percentiles are of the answered requests: failures (timeouts included) are said, not hidden.
        (row.failures > 0 ? ` [${row.failures} failed request(s) are not in the percentiles]` : '') +
        (CANDIDATES.find((candidate) => candidate.name === name)?.nodeDefaults === true ? ' [diagnostic row: started without the production Node flags]' : '')
    )
  }
  lines.push(...handwrittenLines(rows), ...plainReferenceLines(rows))
  if (memory !== undefined) {
    const value = memory.heapBytesPerEntry
    lines.push(
      `${value <= MAX_SESSION_BYTES_PER_ENTRY ? 'PASS' : 'FAIL'} session map ${value.toFixed(0)} heap bytes/entry at ${memory.entries.toLocaleString('en-US')} entries (goal <= ${MAX_SESSION_BYTES_PER_ENTRY}); RSS ${memory.rssBytesPerEntry.toFixed(0)} bytes/entry`
    )
  }
  return lines
}

/**
 * Each goal row against the hand-written node:http + undici proxy (bench/handwritten-proxy.mjs,
 * started with the gateway's flags when it is measured): what is left between the gateway and
 * the least a proxy hop costs here. Informational.
 */
function handwrittenLines(rows) {
  const handwritten = rows['handwritten-proxy']?.rps
  if (handwritten === undefined) return []
  const lines = ['against the hand-written proxy (informational):']
  for (const goal of GOALS) {
    const row = rows[goal.row]
    if (row !== undefined) lines.push(`  ${goal.row}: ${(row.rps / handwritten).toFixed(2)}x the hand-written proxy`)
  }
  return lines
}

/**
 * The reference as a user would start it, with Node's defaults. The verdicts above compare like
 * for like (the reference with the gateway's flags); this shows how much the flags alone give.
 */
function plainReferenceLines(rows) {
  const plain = rows['fastify-http-proxy']?.rps
  const tuned = rows[BASELINE]?.rps
  if (plain === undefined) return []
  const lines = [
    `plain reference: fastify-http-proxy on Node's defaults; the one with the gateway's flags (${GATEWAY_NODE_FLAGS.join(' ')}) read ${tuned === undefined ? 'n/a' : `${(tuned / plain).toFixed(2)}x`} it. Against it (informational):`
  ]
  for (const goal of GOALS) {
    const row = rows[goal.row]
    if (row !== undefined) lines.push(`  ${goal.row}: ${(row.rps / plain).toFixed(2)}x the plain reference`)
  }
  return lines
}

async function main() {
  // This runner drains the gateway's log pipe: keep that work on the load core.
  if (pin) pinSelf(LOAD_CORE)
  workDir = await mkdtemp(join(tmpdir(), 'v4gw-bench-'))
  log(
    `${selected.length} rows x ${settings.rounds} round(s), ${settings.warmupSec} s warm-up + ${settings.durationSec} s each, ` +
      `${settings.generator}, ${settings.connections} connections, pipelining 1; ${pin ? `measured process on core ${MEASURED_CORE}, load + stub on core ${LOAD_CORE}` : 'no pinning (taskset or core 0 or 1 missing)'}`
  )
  const samples = Object.fromEntries(selected.map((candidate) => [candidate.name, []]))
  let remeasured = 0
  try {
    for (let round = 0; round < settings.rounds; round++) {
      // Alternate the order so that drift (thermal, other work on the machine) does not favour one row.
      const order = round % 2 === 0 ? measurementOrder : [...measurementOrder].reverse()
      for (const [seq, candidate] of order.entries()) {
        let sample
        for (let attempt = 0; attempt <= settings.remeasures; attempt++) {
          const next = await measureOnce(candidate)
          // A window with no 2xx answer has no percentiles (NaN): said as n/a, and failed below.
          log(
            `round ${round + 1} ${candidate.name}: ${fixed(0)(next.rps)} req/s, p50 ${fixed(2)(next.p50Ms)} ms, p99 ${fixed(2)(next.p99Ms)} ms, ` +
              `${fixed(1)(next.cpuUsPerReq)} µs CPU/req, busy ${fixed(0)(next.busyPct)}%, other work ${fixed(0)(next.foreignCpuPct)}% of a core${next.failures > 0 ? `, ${next.failures} FAILED` : ''}${next.droppedSpans > 0 ? `, ${next.droppedSpans} span(s) DROPPED` : ''}`
          )
          if (sample === undefined || next.foreignCpuPct < sample.foreignCpuPct) sample = next
          if (sample.foreignCpuPct <= MAX_OTHER_WORK_PCT) break
          if (attempt < settings.remeasures) {
            remeasured++
            log(`  other work over ${MAX_OTHER_WORK_PCT}% of a core: measuring ${candidate.name} again`)
          }
        }
        // Where it stood in the round: a goal pairs it with its partner's nearest window (pairedRatios).
        samples[candidate.name].push({ ...sample, round, seq })
      }
    }
    let memory
    if (!flags['no-memory']) {
      memory = await measureMemory()
      log(`session map: ${memory.heapBytesPerEntry.toFixed(0)} heap bytes/entry, ${memory.rssBytesPerEntry.toFixed(0)} RSS bytes/entry at ${memory.entries} entries`)
    }

    // Each metric is the median (or best) over the rounds, taken per metric.
    const higher = flags.stat === 'best' ? (values) => Math.max(...values) : median
    const lower = flags.stat === 'best' ? (values) => Math.min(...values) : median
    const rows = {}
    for (const [name, list] of Object.entries(samples)) {
      rows[name] = {
        rps: higher(list.map((sample) => sample.rps)),
        p50Ms: lower(list.map((sample) => sample.p50Ms)),
        p99Ms: lower(list.map((sample) => sample.p99Ms)),
        cpuUsPerReq: lower(list.map((sample) => sample.cpuUsPerReq)),
        rssMiB: median(list.map((sample) => sample.rssMiB)),
        foreignCpuPct: median(list.map((sample) => sample.foreignCpuPct)),
        busyPct: median(list.map((sample) => sample.busyPct)),
        failures: list.reduce((sum, sample) => sum + sample.failures, 0),
        completed: list.reduce((sum, sample) => sum + sample.completed, 0)
      }
    }

    const machine = describeMachine()
    console.log('')
    console.log(
      `v4-migration-gateway benchmark: ${flags.stat} of ${settings.rounds} round(s) per metric; ${settings.durationSec} s per row after ${settings.warmupSec} s warm-up; ` +
        `load by ${settings.generator}, ${settings.connections} connections, pipelining 1; ${pin ? `measured process pinned to core ${MEASURED_CORE}, load + stub to core ${LOAD_CORE}` : 'not pinned'}`
    )
    console.log(`machine: ${machine.cpus} x ${machine.cpuModel}; node ${machine.node}; load average at start ${loadAtStart}, at end ${machine.loadAverage}`)
    console.log(`gateway build: ${machine.revision}`)
    console.log(`packages: ${Object.entries(machine.packages).map(([name, version]) => `${name} ${version}`).join(', ')}`)
    console.log('')
    printTable(rows)
    console.log('')
    console.log(`"other work": CPU the machine spent outside this benchmark during the row, in % of one core (of ${cpus().length}; the hypervisor's steal included); high values mean noisy numbers.`)
    console.log(`${remeasured} window(s) measured again for other work over ${MAX_OTHER_WORK_PCT}% of a core (at most ${settings.remeasures} more per row and round; the least disturbed kept).`)
    for (const [name, row] of Object.entries(rows)) {
      if (name !== 'direct' && row.busyPct < 90) {
        console.log(`note: ${name} kept its process only ${row.busyPct.toFixed(0)}% busy (median): the load side set its pace, so its req/s ratio understates it.`)
      }
    }
    console.log('')
    for (const line of goalLines(rows, samples, memory)) console.log(line)
    console.log('')
    console.log(`took ${((Date.now() - startedAt) / 1000).toFixed(1)} s`)

    if (flags.json !== undefined) {
      const candidates = Object.fromEntries(
        Object.entries(rows).map(([name, row]) => [name, { rps: row.rps, p50Ms: row.p50Ms, p99Ms: row.p99Ms, cpuUsPerReq: row.cpuUsPerReq }])
      )
      const foreignCpuPct = Object.fromEntries(Object.entries(rows).map(([name, row]) => [name, row.foreignCpuPct]))
      const busyPct = Object.fromEntries(Object.entries(rows).map(([name, row]) => [name, row.busyPct]))
      await writeFile(flags.json, `${JSON.stringify({ candidates, memory, foreignCpuPct, busyPct, machine, settings: { ...settings, pinned: pin, statistic: flags.stat } }, null, 2)}\n`)
      log(`wrote ${flags.json}`)
    }

    // Failed requests under load mean the numbers describe something broken: judged per window,
    // so that one broken window among a row's fifteen is not averaged away.
    const broken = Object.entries(samples).filter(([, list]) => list.some(isBrokenWindow))
    if (broken.length > 0) {
      console.error(`more than 1% of requests failed in a window of: ${broken.map(([name]) => name).join(', ')}`)
      process.exitCode = 1
    }
  } finally {
    await stopAll()
    if (workDir !== undefined) await rm(workDir, { recursive: true, force: true })
  }
}

main().catch((error) => {
  console.error(`bench failed: ${error.stack ?? error}`)
  process.exitCode = 1
})
