/* global process, console */
// npm run bench:compare [-- --save-base] [-- --only gateway-execute,gateway-native] [-- --rounds N]
// npm run bench:compare -- --pair gateway-execute,gateway-execute-traced-1pct   (two rows of one build)
// npm run bench:compare -- --pair fastify-http-proxy-tuned,gateway-native --load wrk   (a goal's ratio, side by side)
// npm run bench:compare -- --pair gateway-native,gateway-native-traced-1pct --warmup 60   (after a minute of load)
// npm run bench:compare -- --only gateway-native-traced-1pct,gateway-execute-traced-all   (a traced row, build against build)
//
// Two builds of the gateway side by side, for a change too small for `npm run bench` to see:
// on this VM a row's CPU per request drifts by ±30 % over tens of seconds, so two runs minutes
// apart cannot show a 2 % change. Here both builds run at the same time, pinned to the same core,
// each under its own load of the same kind, and each round compares their CPU µs per request of
// the same seconds: the drift hits both alike and cancels in the ratio (the same build against
// itself reads within about ±2.5 % per round in a calm phase of the machine).
//
//   npm run bench:compare -- --save-base   # on the commit to compare against: keeps dist/ as the base
//   (change the code)
//   npm run bench:compare                  # builds, then the change (dist/) against the base
//
// `--pair A,B` runs two rows of the same build (dist/) the same way: B against A, for a setting's
// price (SPEC 17's tracing on against off, issue 30's cost goal) where `npm run bench`, which
// measures rows one after the other, cannot separate a 5 % cost from the VM's drift. Each row gets
// its own load; a traced row exports to a collector that discards (otlp-sink.mjs). A pair may
// take a proxy row too (the reference), so that a goal's ratio against it is read the same way,
// with autocannon or (`--load wrk`) wrk as the load.
//
// Both builds share the core, so neither is saturated alone, and CPU per request under sharing
// is not the solo figure of `npm run bench`: read the ratio, not the absolute numbers. Loopback
// only, bounded, and it ends only the processes it started, by PID.
import { cpSync, existsSync, rmSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { CANDIDATES, loadSpec, PROXY_READY, productionNodeFlags, proxyScriptArgs, writeGatewayConfig } from './candidates.mjs'
import { clockTicksPerSecond, detectPinning, measuredEnv, pinSelf, runNode, startNode, stopAll, stopOnSignals } from './processes.mjs'

const BENCH_DIR = dirname(fileURLToPath(import.meta.url))
const ROOT = dirname(BENCH_DIR)
const BUILD = join(ROOT, 'dist')
// Inside the project, so that the base build resolves the same node_modules.
// `--base DIR`: a build made elsewhere (a worktree of the base commit, with node_modules beside it).
const BASE_BUILD = baseFromArgs() ?? join(ROOT, '.bench-out', 'dist-base')
const GATEWAY_NODE_FLAGS = await productionNodeFlags()
const MEASURED_CORE = 1
const LOAD_CORE = 0
// Rows whose two builds can share one stub. A traced row's base build must know `tracing` (every
// build since SPEC 17's tracing does; an older one stops at its config, unknown key).
const COMPARABLE = CANDIDATES.filter((candidate) => candidate.kind === 'gateway')
const PAIRABLE = CANDIDATES.filter((candidate) => candidate.kind === 'gateway' || candidate.kind === 'proxy')

const { values: flags } = parseArgs({
  options: {
    'save-base': { type: 'boolean', default: false },
    only: { type: 'string', default: 'gateway-native,gateway-execute,gateway-session-hit' },
    base: { type: 'string' },
    pair: { type: 'string' },
    load: { type: 'string', default: 'autocannon' },
    rounds: { type: 'string', default: '8' },
    // Seconds of load before the first round. A traced row's sampled code (SPEC 17) runs on one
    // request in a hundred and takes tens of seconds to be compiled: read its steady state with more.
    warmup: { type: 'string', default: '2' },
    duration: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' }
  }
})

if (flags['save-base']) {
  if (!existsSync(BUILD)) throw new Error('no dist/ to keep: run npm run build first')
  rmSync(BASE_BUILD, { recursive: true, force: true })
  cpSync(BUILD, BASE_BUILD, { recursive: true })
  console.log(`kept ${BUILD} as the base build in ${BASE_BUILD}`)
  process.exit(0)
}
if (flags.pair === undefined && !existsSync(BASE_BUILD)) throw new Error(`no base build in ${BASE_BUILD}: run npm run bench:compare -- --save-base on the commit to compare against`)
if (!detectPinning([LOAD_CORE, MEASURED_CORE])) throw new Error('comparing builds needs taskset and two cores: both builds on one core, the loads on the other')

function findRow(name, among) {
  const row = among.find((candidate) => candidate.name === name)
  if (row === undefined) throw new Error(`unknown row ${name}; one of ${among.map((candidate) => candidate.name).join(', ')}`)
  return row
}

/** What each comparison runs: a row on the base build against the same row on dist/, or (--pair) two rows on dist/. */
const comparisons =
  flags.pair === undefined
    ? flags.only.split(',').map((name) => {
        const row = findRow(name, COMPARABLE)
        return { name, base: { row, build: BASE_BUILD }, change: { row, build: BUILD } }
      })
    : [pairComparison(flags.pair.split(','))]

function pairComparison(names) {
  if (names.length !== 2) throw new Error('--pair takes two rows: --pair A,B')
  const [baseRow, changeRow] = names.map((name) => findRow(name, PAIRABLE))
  return { name: `${changeRow.name} against ${baseRow.name}`, base: { row: baseRow, build: BUILD }, change: { row: changeRow, build: BUILD } }
}
if (flags.load !== 'autocannon' && flags.load !== 'wrk') throw new Error('--load is autocannon or wrk')
const settings = { rounds: Number(flags.rounds), durationSec: Number(flags.duration), connections: Number(flags.connections), generator: flags.load, warmupSec: Number(flags.warmup) }

function baseFromArgs() {
  const at = process.argv.indexOf('--base')
  return at === -1 || process.argv[at + 1] === undefined ? undefined : resolve(process.argv[at + 1])
}

/** A throwaway redis-server on a free loopback port, on the load core; its URL. stopAll ends it with the rest. */
async function startRedis() {
  const port = await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port: free } = server.address()
      server.close(() => resolve(free))
    })
  })
  await startNode({ name: 'redis-server', executable: 'redis-server', args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], core: LOAD_CORE, pin: true, ready: /Ready to accept connections/ })
  return `redis://127.0.0.1:${port}`
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/** A row's process on the measured core: a proxy script (the reference) or the gateway of `build`. */
async function startSide(row, build, label, stubUrl, workDir, redisUrl, sinkUrl) {
  if (row.kind !== 'proxy') return startGateway(row, build, label, stubUrl, workDir, redisUrl, sinkUrl)
  const { handle, match } = await startNode({
    name: `${row.name} (${label})`,
    args: [...(row.productionFlags ? GATEWAY_NODE_FLAGS : []), ...proxyScriptArgs(row, stubUrl)],
    core: MEASURED_CORE,
    pin: true,
    ready: PROXY_READY,
    env: measuredEnv()
  })
  return { handle, url: match[1] }
}

async function startGateway(row, build, label, stubUrl, workDir, redisUrl, sinkUrl) {
  const config = await writeGatewayConfig(workDir, `${row.name}-${label}`, {
    upstreamUrl: stubUrl,
    logLevel: row.logLevel,
    idempotency: row.idempotency === true,
    legacyStage: row.legacyStage === true,
    shadowStage: row.shadowStage === true,
    tracing: row.tracing === undefined ? undefined : { ...row.tracing, endpoint: sinkUrl },
    redisUrl
  })
  const { handle, match } = await startNode({
    name: `${row.name} (${label})`,
    args: [...(row.nodeDefaults ? [] : GATEWAY_NODE_FLAGS), join(build, 'cli.js'), '--config', config],
    core: MEASURED_CORE,
    pin: true,
    // The serving PID: on Node without process.execve a gateway that relaunches itself with flags
    // it lacks (the node-defaults row without V4GW_NODE_FLAGS=off, a base build whose flag list
    // differs) serves from the launcher's child. A build older than the PID in its line serves
    // from the process started.
    ready: /^v4gw listening on (\S+) \(admin \S+\)(?: pid (\d+))?/,
    env: measuredEnv({ NODE_ENV: 'production', ...(row.nodeDefaults ? { V4GW_NODE_FLAGS: 'off' } : {}) }),
    stdoutFile: join(workDir, `${row.name}-${label}.log`)
  })
  return { handle, url: match[1], servingPid: match[2] === undefined ? handle.pid : Number(match[2]) }
}

/** One load window on one build; resolves with its CPU µs per answered request. */
async function load(row, gateway, warmupSec, otherPids) {
  const spec = loadSpec(row.load, gateway.url, {
    generator: settings.generator,
    // Each build gets half: together they put the usual load on the shared core.
    connections: Math.max(1, Math.round(settings.connections / 2)),
    warmupSec,
    durationSec: settings.durationSec,
    measuredPid: gateway.servingPid ?? gateway.handle.pid,
    otherPids
  })
  const output = await runNode({ name: `load(${row.name})`, args: [join(BENCH_DIR, 'load.mjs'), JSON.stringify(spec)], core: LOAD_CORE, pin: true, timeoutMs: (warmupSec + settings.durationSec + 30) * 1000 })
  const sample = JSON.parse(output.trim().split('\n').at(-1))
  const answered = sample.ok + sample.non2xx
  if (answered === 0 || sample.errors + sample.timeouts + sample.stalled + sample.non2xx > answered * 0.01) throw new Error(`${row.name}: more than 1% of requests failed`)
  return { cpuTicks: sample.cpuTicks, answered }
}

async function compareRow(comparison, workDir, ticksPerSecond) {
  // Each side gets its own row's load and first-answer check (a traced pair's are the same).
  const { handle: stub, match } = await startNode({ name: 'stub', args: [join(BENCH_DIR, 'stub-upstream.mjs')], core: LOAD_CORE, pin: true, ready: /^stub listening on (\S+)/ })
  const traced = comparison.base.row.tracing !== undefined || comparison.change.row.tracing !== undefined
  const sink = traced ? await startNode({ name: 'otlp-sink', args: [join(BENCH_DIR, 'otlp-sink.mjs')], core: LOAD_CORE, pin: true, ready: /^otlp sink listening on (\S+)/ }) : undefined
  // A Redis row: each side its own redis-server on the load core, so neither shares the other's keys.
  const redisFor = async (side) => (side.row.redis === true ? await startRedis() : undefined)
  const [baseRedis, changeRedis] = [await redisFor(comparison.base), await redisFor(comparison.change)]
  const base = await startSide(comparison.base.row, comparison.base.build, 'base', match[1], workDir, baseRedis, sink?.match[1])
  const change = await startSide(comparison.change.row, comparison.change.build, 'change', match[1], workDir, changeRedis, sink?.match[1])
  for (const [side, started] of [[comparison.base, base], [comparison.change, change]]) await side.row.check(side.row.name, started.url, side.row.load)
  // A launcher and its serving child are both the benchmark's (each listed once).
  const otherPids = [...new Set([stub.pid, process.pid, base.handle.pid, change.handle.pid, base.servingPid ?? base.handle.pid, change.servingPid ?? change.handle.pid, ...(sink === undefined ? [] : [sink.handle.pid])])]
  const ratios = []
  const perRequest = { base: [], change: [] }
  for (let round = 0; round < settings.rounds; round++) {
    // Both loads start together and run the same seconds; the first round warms both builds up.
    const warmupSec = round === 0 ? settings.warmupSec : 0
    const [onBase, onChange] = await Promise.all([load(comparison.base.row, base, warmupSec, otherPids), load(comparison.change.row, change, warmupSec, otherPids)])
    const baseUs = (onBase.cpuTicks * 1e6) / ticksPerSecond / onBase.answered
    const changeUs = (onChange.cpuTicks * 1e6) / ticksPerSecond / onChange.answered
    perRequest.base.push(baseUs)
    perRequest.change.push(changeUs)
    ratios.push(changeUs / baseUs)
  }
  await stopAll()
  return { ratios, base: median(perRequest.base), change: median(perRequest.change) }
}

/** This run's temporary directory (configs, logs), removed at the end or on a signal. */
let workDir

async function main() {
  pinSelf(LOAD_CORE)
  const ticksPerSecond = clockTicksPerSecond()
  workDir = await mkdtemp(join(tmpdir(), 'v4gw-compare-'))
  try {
    const what = flags.pair === undefined ? `change (dist/) against base (${BASE_BUILD})` : `two rows of dist/`
    console.log(`${what}: ${settings.rounds} rounds of ${settings.durationSec} s, both on core ${MEASURED_CORE}, loads (${settings.generator}) on core ${LOAD_CORE}`)
    for (const comparison of comparisons) {
      const result = await compareRow(comparison, workDir, ticksPerSecond)
      const sorted = [...result.ratios].sort((a, b) => a - b)
      const change = median(result.ratios) - 1
      console.log(
        `${comparison.name}: CPU per request ${change >= 0 ? '+' : ''}${(100 * change).toFixed(1)} % (change/base per round ${sorted[0].toFixed(3)}–${sorted.at(-1).toFixed(3)}; ` +
          `${result.base.toFixed(1)} → ${result.change.toFixed(1)} µs/req while sharing the core)`
      )
      console.log(`  per round, in order: ${result.ratios.map((ratio) => ratio.toFixed(3)).join(' ')}`)
    }
  } finally {
    await stopAll()
    await rm(workDir, { recursive: true, force: true })
  }
}

stopOnSignals('comparison', () => workDir)
main().catch((error) => {
  console.error(`compare failed: ${error.stack ?? error}`)
  process.exitCode = 1
})
