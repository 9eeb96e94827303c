/* global process, setTimeout, clearTimeout */
// The load generator, in its own process so that the runner can pin it to the load core.
// Usage: node bench/load.mjs '<json spec>'; prints one JSON line with the measurement.
//
// It reads the measured process's CPU counters itself, right before and right after the measured
// window, so that the window is exact and warm-up CPU is excluded.
import autocannon from 'autocannon'
import { runWrk } from './wrk.mjs'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'

const spec = JSON.parse(process.argv[2] ?? '')

/**
 * utime + stime of every thread of `pid`, in clock ticks (proc(5): fields 14 and 15); with
 * `withChildren`, plus those of its waited-for children (fields 16 and 17), e.g. wrk.
 */
function cpuTicks(pid, withChildren = false) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name may hold spaces; fields after it are space-separated from field 3 on.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return Number(fields[11]) + Number(fields[12]) + (withChildren ? Number(fields[13]) + Number(fields[14]) : 0)
}

/** Resident memory of `pid` in MiB (proc(5): VmRSS), at the end of the window: what the load cost in memory. */
function residentMiB(pid) {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((entry) => entry.startsWith('VmRSS:'))
  return line === undefined ? NaN : Number(line.split(/\s+/)[1]) / 1024
}

/** Busy ticks of the whole machine, all cores (proc(5): the `cpu` line minus idle and iowait). */
function machineBusyTicks() {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1, 9).map(Number)
  const [user, nice, system, , , irq, softirq, steal] = fields
  return user + nice + system + irq + softirq + steal
}

/** CPU ticks of the benchmark's own processes: measured, stub, runner and this load generator. */
function ownTicks() {
  return [...new Set([spec.measuredPid, ...spec.otherPids])].reduce((sum, pid) => sum + cpuTicks(pid), 0) + cpuTicks(process.pid, true)
}

function options(durationSec) {
  return {
    url: spec.url,
    method: spec.method,
    headers: spec.headers,
    body: spec.body,
    // `[<id>]` in the body becomes a fresh id per request (session-miss: a new state key each call).
    idReplacement: spec.idReplacement === true,
    connections: spec.connections,
    pipelining: 1,
    duration: durationSec,
    // Seconds. A request unanswered this long is a failure (autocannon counts it and reconnects);
    // the p99 goals are milliseconds, so no healthy row comes near it.
    timeout: STALL_SEC
  }
}

/**
 * A request still unanswered when the run stops is neither a timeout nor in the percentiles
 * (autocannon drops it with its client): a connection with no answer in the window's last
 * STALL_SEC is counted as one stalled request, so a row that hangs some connections cannot read
 * "failed 0". With the STALL_SEC timeout (which reconnects a hung connection) that is in effect
 * a connection that never answered.
 */
const STALL_SEC = 2

/** autocannon's histogram keeps whole milliseconds; percentiles here come from the exact times. */
function percentile(sorted, fraction) {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)]
}

const useWrk = spec.generator === 'wrk'
const latencies = []
let ok = 0
let bad = 0
let errors = 0
let timeouts = 0
let stalled = 0
let wrkPercentiles
let cpuBefore = 0
let busyBefore = 0
let startedAt = 0
function openWindow() {
  cpuBefore = cpuTicks(spec.measuredPid)
  busyBefore = machineBusyTicks() - ownTicks()
  startedAt = performance.now()
}

if (useWrk) {
  // wrk cannot start counting mid-run, so its warm-up is a run of its own on other connections.
  if (spec.warmupSec > 0) await runWrk({ ...spec, durationSec: spec.warmupSec })
  openWindow()
  const result = await runWrk({ ...spec, durationSec: spec.durationSec })
  ok = result.ok
  bad = result.non2xx
  errors = result.errors
  timeouts = result.timeouts
  wrkPercentiles = { p50Ms: result.p50Ms, p99Ms: result.p99Ms }
} else {
  // One run covers warm-up and window, and only answers after the warm-up count, so the window
  // measures the same kept-alive connections. A separate warm-up run closes its connections and
  // the window would open 50 new ones: their first few hundred milliseconds (new sockets on both
  // sides, the load generator's fresh clients) read several times p50 and alone moved p99 by up
  // to half (2026-11-23).
  let measuring = false
  /** Each connection's (autocannon client's) last answer, for the stall count at the end. */
  const lastAnswerAt = new Map()
  const instance = autocannon(options(spec.warmupSec + spec.durationSec))
  const warmupTimer = setTimeout(() => {
    openWindow()
    measuring = true
  }, spec.warmupSec * 1000)
  instance.on('response', function recordResponse(client, statusCode, _bytes, responseTimeMs) {
    lastAnswerAt.set(client, performance.now())
    if (!measuring) return
    if (statusCode >= 200 && statusCode < 300) {
      ok++
      latencies.push(responseTimeMs)
    } else {
      bad++
    }
  })
  const result = await instance
  clearTimeout(warmupTimer)
  if (!measuring) throw new Error('the load run ended before its warm-up did')
  const liveSince = performance.now() - STALL_SEC * 1000
  stalled = spec.connections - [...lastAnswerAt.values()].filter((at) => at >= liveSince).length
  // autocannon counts these over the whole run, warm-up included: a failure there is still one.
  errors = result.errors
  timeouts = result.timeouts
}
const elapsedSec = (performance.now() - startedAt) / 1000
const cpuAfter = cpuTicks(spec.measuredPid)
const rssMiB = residentMiB(spec.measuredPid)
// CPU the machine spent on anything but this benchmark during the window: a noise indicator.
const foreignTicks = machineBusyTicks() - ownTicks() - busyBefore

const sorted = Float64Array.from(latencies).sort()
process.stdout.write(
  `${JSON.stringify({
    ok,
    non2xx: bad,
    errors,
    timeouts,
    stalled,
    elapsedSec,
    rps: ok / elapsedSec,
    p50Ms: wrkPercentiles?.p50Ms ?? percentile(sorted, 0.5),
    p99Ms: wrkPercentiles?.p99Ms ?? percentile(sorted, 0.99),
    cpuTicks: cpuAfter - cpuBefore,
    rssMiB,
    foreignTicks
  })}\n`
)
