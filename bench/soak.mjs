/* global process, console, setInterval, clearInterval, URL */
// npm run soak: mixed legacy and native traffic at saturation against several real gateway
// processes behind a client-side round robin (a load balancer), with a config reload (SIGHUP to
// every gateway, SPEC 8) one third in and a rolling restart (each gateway in turn replaced by a
// new process, then sent SIGTERM, SPEC 9) two thirds in. Samples every gateway's RSS each second,
// and its heap used and count of major GCs from its admin /metrics, and draws both as ASCII
// charts, one per gateway slot. Loopback only, bounded in time, ends only the processes it started
// (by PID). Exits non-zero if an accepted request was lost, a reload or a drain failed, or, once
// major GCs had started, a gateway's RSS or its heap floor grew (bench/soak-memory.mjs).
// Usage: npm run soak [-- --seconds 60 | --minutes 10] [--gateways 3] [--concurrency 64] [--json FILE]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseArgs } from 'node:util'
import { Pool, request } from 'undici'
import { stringify } from 'yaml'
import { plotTimeSeries } from './ascii-plot.mjs'
import { judgeMemory, majorGcTimes, median, parseMemoryMetrics, perMinute, slopePerMinute } from './soak-memory.mjs'
import { productionNodeFlags } from './candidates.mjs'
import { killAllNow, startNode, stopAll, stopProcess } from './processes.mjs'

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '60' },
    minutes: { type: 'string' },
    gateways: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '64' },
    json: { type: 'string' }
  }
})
const SECONDS = values.minutes !== undefined ? Number(values.minutes) * 60 : Number(values.seconds)
const GATEWAYS = Number(values.gateways)
const CONCURRENCY = Number(values.concurrency)
for (const [name, value] of [['duration', SECONDS], ['gateways', GATEWAYS], ['concurrency', CONCURRENCY]]) {
  if (!(value > 0)) throw new Error(`soak: ${name} must be a positive number`)
}
// RSS may settle higher than at warm-up (JIT, pools, the session map filling up); twice that, and
// at least 64 MiB more, is growth without bound.
const RSS_GROWTH_LIMIT = (startBytes) => Math.max(startBytes * 2, startBytes + 64 * 1024 * 1024)
// Whether memory levelled off is judged by bench/soak-memory.mjs, from the first major GC on:
// before it, with the image's 128 MiB first old-space limit, the heap is still filling.
const ROOT = new URL('..', import.meta.url).pathname
const STATE_KEYS = 200
const PLOT_WIDTH = 72
const PLOT_HEIGHT = 10

const dir = mkdtempSync(join(tmpdir(), 'v4gw-soak-'))
process.once('SIGINT', () => {
  killAllNow()
  process.exit(130)
})
process.once('exit', killAllNow)

function gatewayConfig(stubUrl, generation) {
  return {
    listen: { host: '127.0.0.1', port: 0 },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'info' },
    tenancy: { default: 'acme' },
    // A reload must change something a client can see: the deprecation date.
    tenants: { acme: { upstream: { staging: stubUrl }, legacy: { deprecation: { date: `2026-0${generation}-01T00:00:00Z` } } } }
  }
}

// Started as `npm start` and the Docker image start it.
const GATEWAY_NODE_FLAGS = await productionNodeFlags()

async function startGateway(name, configPath) {
  const { handle, match } = await startNode({
    name,
    args: [...GATEWAY_NODE_FLAGS, join(ROOT, 'dist/cli.js'), '--config', configPath],
    ready: /v4gw listening on (\S+) \(admin (\S+)\)/
  })
  return { name, handle, url: match[1], adminUrl: match[2] }
}

/** Waits for 200 on /readyz, as a kubelet does before the pod gets traffic. */
async function untilReady(gateway, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    try {
      const response = await request(`${gateway.adminUrl}/readyz`)
      await response.body.dump()
      if (response.statusCode === 200) return
    } catch {
      // Not listening yet.
    }
    await sleep(50)
  }
  throw new Error(`${gateway.name} was not ready within ${timeoutMs} ms`)
}

/** Heap used, old space used and the count of major GCs, from the gateway's admin /metrics. */
async function memoryMetrics(gateway) {
  const response = await request(`${gateway.adminUrl}/metrics`, { headersTimeout: 5000, bodyTimeout: 5000 })
  return parseMemoryMetrics(await response.body.text())
}

/** The count of successful reloads the gateway reports (SPEC 9 metrics). */
async function successfulReloads(gateway) {
  const response = await request(`${gateway.adminUrl}/metrics`)
  const text = await response.body.text()
  return Number(/^v4gw_config_reloads_total\{[^}]*result="success"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0)
}

function rssBytes(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
  } catch {
    return 0 // gone between the check and the read
  }
}

/** One request of the mix: 40 % legacy execute, 30 % legacy session-execute, 30 % native. */
function nextRequest(sequence) {
  const kind = sequence % 10
  const headers = { authorization: 'Bearer soak-token', 'content-type': 'application/json' }
  if (kind < 4) return { kind: 'legacy-execute', path: '/v1/headless/runs', headers, body: `{"input":${sequence}}` }
  if (kind < 7) return { kind: 'legacy-session', path: '/v1/runs/invoke', headers, body: `{"input":${sequence},"stateId":"s${sequence % STATE_KEYS}"}` }
  return { kind: 'native', path: '/v4/execute', headers, body: `{"input":${sequence}}` }
}

const counts = { sent: 0, answered: 0, ok: 0, shed: 0, failed: 0, lost: 0, refused: 0, byKind: {} }
const lostSamples = []
let loadStartedAt = 0
const secondsSinceStart = () => (Date.now() - loadStartedAt) / 1000

/** The gateways in rotation, one per slot; a slot's entry is swapped at its restart, as a load balancer does on readiness. */
const rotation = []
let nextTarget = 0

async function worker(id, deadline) {
  let sequence = id
  while (Date.now() < deadline) {
    const current = rotation[nextTarget++ % rotation.length]
    const request = nextRequest(sequence)
    sequence += CONCURRENCY
    counts.sent++
    const sentAt = secondsSinceStart()
    try {
      const response = await current.pool.request({ method: 'POST', path: request.path, headers: request.headers, body: request.body })
      await response.body.dump()
      counts.answered++
      counts.byKind[request.kind] = (counts.byKind[request.kind] ?? 0) + 1
      if (response.statusCode < 300) counts.ok++
      else if (response.statusCode === 503) counts.shed++
      else counts.failed++
    } catch (error) {
      // Refused connections were never accepted; anything else was accepted and not answered.
      if (error.code === 'ECONNREFUSED') counts.refused++
      else {
        counts.lost++
        // When: at the reload, the rolling restart, or neither.
        if (lostSamples.length < 20) lostSamples.push(`sent ${sentAt.toFixed(3)} s, failed ${secondsSinceStart().toFixed(3)} s, ${request.kind} to ${current.gateway.name}: ${error.code ?? ''} ${error.message}`)
      }
    }
  }
}

function inRotation(gateway) {
  return { gateway, pool: new Pool(gateway.url, { connections: CONCURRENCY, pipelining: 1 }) }
}

async function main() {
  const { handle: stub, match } = await startNode({ name: 'stub', args: [join(ROOT, 'bench/stub-upstream.mjs')], ready: /stub listening on (\S+)/ })
  const stubUrl = match[1]
  // One file for every gateway: the listeners take free ports, and a reload rewrites it for all.
  const configPath = join(dir, 'gateway.yaml')
  writeFileSync(configPath, stringify(gatewayConfig(stubUrl, 1)))
  const firsts = await Promise.all(Array.from({ length: GATEWAYS }, (_, index) => startGateway(`gateway-${index + 1}`, configPath)))
  /** Per slot, every process that served it, in order, with its RSS, heap and major GC samples. */
  const newLife = (gateway, from) => ({ gateway, samples: [], heap: [], oldSpace: [], gcs: [], scraping: false, from })
  const slots = firsts.map((gateway) => [newLife(gateway, 0)])
  for (const gateway of firsts) rotation.push(inRotation(gateway))
  console.log(`soak: ${SECONDS} s, ${GATEWAYS} gateways (pids ${firsts.map((gateway) => gateway.handle.pid).join(', ')}), ${CONCURRENCY} concurrent`)

  loadStartedAt = Date.now()
  const deadline = loadStartedAt + SECONDS * 1000
  const load = Promise.all(Array.from({ length: CONCURRENCY }, (_, id) => worker(id, deadline)))
  const sampler = setInterval(() => {
    const t = secondsSinceStart()
    for (const slot of slots) {
      for (const life of slot) {
        if (life.gateway.handle.exited || life.to !== undefined) continue
        const value = rssBytes(life.gateway.handle.pid)
        if (value > 0) life.samples.push({ t, value })
        // One scrape at a time per process; a slow one skips a second rather than pile up.
        if (life.scraping) continue
        life.scraping = true
        memoryMetrics(life.gateway)
          .then(({ heapUsedBytes, oldSpaceUsedBytes, majorGcs }) => {
            if (life.to !== undefined) return
            if (heapUsedBytes !== null) life.heap.push({ t, value: heapUsedBytes })
            if (oldSpaceUsedBytes !== null) life.oldSpace.push({ t, value: oldSpaceUsedBytes })
            if (majorGcs !== null) life.gcs.push({ t, count: majorGcs })
          })
          .catch(() => {}) // stopping, or too busy to answer within 5 s: a gap in the chart
          .finally(() => {
            life.scraping = false
          })
      }
    }
  }, 1000)

  // One third in: reload every gateway with a changed config (SIGHUP, SPEC 8), and read each
  // one's count of successful reloads to know it took.
  await sleepUntil(loadStartedAt, deadline, 1 / 3)
  const reloadAt = secondsSinceStart()
  writeFileSync(configPath, stringify(gatewayConfig(stubUrl, 2)))
  for (const gateway of firsts) process.kill(gateway.handle.pid, 'SIGHUP')
  const reloads = await Promise.all(firsts.map((gateway) => reloadTook(gateway)))

  // Two thirds in: a rolling restart, one slot at a time. The new process starts and turns
  // ready, takes the slot's share of new requests, and only then does the old one get SIGTERM; it
  // must answer everything it accepted and exit 0 (SPEC 9: in-flight requests finish).
  await sleepUntil(loadStartedAt, deadline, 2 / 3)
  const restarts = []
  for (const [index, slot] of slots.entries()) {
    const old = slot[slot.length - 1]
    const replacement = await startGateway(`gateway-${index + 1}b`, configPath)
    await untilReady(replacement)
    const previous = rotation[index]
    const at = secondsSinceStart()
    slot.push(newLife(replacement, at))
    rotation[index] = inRotation(replacement)
    const rssAtRestart = rssBytes(old.gateway.handle.pid)
    old.to = at
    process.kill(old.gateway.handle.pid, 'SIGTERM')
    const exit = await old.gateway.handle.exitedPromise
    await previous.pool.close()
    restarts.push({ slot: index + 1, at, oldPid: old.gateway.handle.pid, newPid: replacement.handle.pid, exit, rssAtRestart })
  }

  await load
  clearInterval(sampler)
  const ranFor = secondsSinceStart()
  await Promise.all(rotation.map((target) => target.pool.close()))
  const lastRss = slots.map((slot) => rssBytes(slot[slot.length - 1].gateway.handle.pid))
  for (const slot of slots) await stopProcess(slot[slot.length - 1].gateway.handle)
  await stopProcess(stub)

  const verdicts = slots.map((slot, index) => judgeRss(slot[0], restarts[index]))
  const memory = slots.map((slot, index) => judgeMemory({ rss: slot[0].samples, heap: slot[0].heap, oldSpace: slot[0].oldSpace, gcs: slot[0].gcs, end: restarts[index].at }))
  const lastMajorGcs = slots.map((slot) => majorGcTimes(slot[slot.length - 1].gcs).length)
  const report = {
    seconds: SECONDS,
    gateways: GATEWAYS,
    concurrency: CONCURRENCY,
    requests: counts,
    lostSamples,
    reload: { atSeconds: round(reloadAt), gateways: reloads },
    restarts: restarts.map(({ slot, at, oldPid, newPid, exit }) => ({ slot, atSeconds: round(at), oldPid, newPid, exit })),
    rss: verdicts.map((verdict, index) => ({ slot: index + 1, ...verdict, replacementEndMiB: mib(lastRss[index]) })),
    memory: memory.map((verdict, index) => ({ slot: index + 1, pid: slots[index][0].gateway.handle.pid, ...verdict, replacementMajorGcs: lastMajorGcs[index] })),
    samples: slots.map((slot) =>
      slot.map((life) => ({
        pid: life.gateway.handle.pid,
        rssMiB: life.samples.map(({ t, value }) => [round(t), mib(value)]),
        heapUsedMiB: life.heap.map(({ t, value }) => [round(t), mib(value)]),
        oldSpaceUsedMiB: life.oldSpace.map(({ t, value }) => [round(t), mib(value)]),
        majorGcs: life.gcs.map(({ t, count }) => [round(t), count])
      }))
    ),
    node: process.version
  }
  console.log(JSON.stringify({ ...report, samples: '(in --json)' }, null, 2))
  console.log(renderPlots(slots, { reloadAt, restarts, xMax: Math.max(ranFor, SECONDS) }).join('\n'))
  console.log(renderHeapPlots(slots, { reloadAt, restarts, xMax: Math.max(ranFor, SECONDS) }).join('\n'))
  if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`)

  const problems = []
  if (counts.lost > 0) problems.push(`${counts.lost} accepted requests were lost`)
  if (counts.ok === 0) problems.push('no request succeeded')
  for (const reload of reloads) if (!reload.took) problems.push(`${reload.gateway} did not report a successful reload after SIGHUP`)
  for (const restart of restarts) {
    if (restart.exit.code !== 0) problems.push(`gateway-${restart.slot} exited with ${restart.exit.code ?? restart.exit.signal} after SIGTERM`)
  }
  for (const [index, verdict] of verdicts.entries()) {
    if (!verdict.withinLimit) problems.push(`gateway-${index + 1} RSS grew from ${verdict.warmupMiB} to ${verdict.atRestartMiB} MiB (limit ${verdict.limitMiB})`)
  }
  const notes = []
  for (const [index, verdict] of memory.entries()) {
    const name = `gateway-${index + 1}`
    if (verdict.notJudged !== null) notes.push(`${name}: memory plateau not judged: ${verdict.notJudged}`)
    if (verdict.rssAfterFirstGc?.level === false) {
      const { middleThirdMedianMiB, lastThirdMedianMiB, toleranceMiB } = verdict.rssAfterFirstGc
      problems.push(`${name} RSS did not level off after major GCs started: median ${middleThirdMedianMiB} MiB in the middle third, ${lastThirdMedianMiB} MiB in the last (tolerance ${toleranceMiB})`)
    }
    if (verdict.heapFloor?.level === false) {
      const { earlierHalfLowestMiB, laterHalfLowestMiB, toleranceMiB } = verdict.heapFloor
      problems.push(`${name} heap floor after major GCs grew: lowest ${earlierHalfLowestMiB} MiB over the earlier half of its GCs, ${laterHalfLowestMiB} MiB over the later (tolerance ${toleranceMiB})`)
    }
  }
  for (const [index, verdict] of memory.entries()) {
    if (verdict.plateau === null) continue
    const { rssAfterFirstGc: rss, heapFloor: floor } = verdict
    console.log(
      `soak: gateway-${index + 1}: ${verdict.majorGcs} major GCs, the first at ${verdict.firstMajorGcAt} s; after it RSS median ${rss.middleThirdMedianMiB} → ${rss.lastThirdMedianMiB} MiB (middle → last third), lowest heap floor ${floor.earlierHalfLowestMiB} → ${floor.laterHalfLowestMiB} MiB (earlier → later half of the GCs; old space ${floor.oldSpaceEarlierHalfLowestMiB} → ${floor.oldSpaceLaterHalfLowestMiB})`
    )
  }
  for (const note of notes) console.log(`soak: ${note}`)
  console.log(problems.length === 0 ? 'soak: PASS' : `soak: FAIL\n- ${problems.join('\n- ')}`)
  return problems.length === 0 ? 0 : 1
}

/** Polls the gateway's reload count for a few seconds after SIGHUP. */
async function reloadTook(gateway) {
  const deadline = Date.now() + 5000
  while (Date.now() < deadline) {
    if ((await successfulReloads(gateway).catch(() => 0)) >= 1) return { gateway: gateway.name, took: true }
    await sleep(100)
  }
  return { gateway: gateway.name, took: false }
}

/** A first gateway's RSS: bounded at its restart; the slope of its second half, for the record (the plateau is judgeMemory's). */
function judgeRss(life, restart) {
  const samples = life.samples
  // Warm-up: the first samples include start-up and JIT; take the third second as the start.
  const warmup = samples[Math.min(2, samples.length - 1)]?.value ?? restart.rssAtRestart
  return {
    pid: life.gateway.handle.pid,
    warmupMiB: mib(warmup),
    atRestartMiB: mib(restart.rssAtRestart),
    limitMiB: mib(RSS_GROWTH_LIMIT(warmup)),
    withinLimit: restart.rssAtRestart <= RSS_GROWTH_LIMIT(warmup),
    lifeSeconds: round(restart.at),
    secondHalfSlopeMiBPerMinute: samples.length >= 4 ? round(slopePerMinute(samples.slice(Math.floor(samples.length / 2)).map(({ t, value }) => ({ t, value: value / 2 ** 20 })))) : null,
    medianByMinuteMiB: perMinuteMedians(samples)
  }
}

/** The median RSS of each whole or part minute of a life, in MiB. */
function perMinuteMedians(samples) {
  const minutes = new Map()
  for (const { t, value } of samples) {
    const minute = Math.floor(t / 60)
    if (!minutes.has(minute)) minutes.set(minute, [])
    minutes.get(minute).push(value / 2 ** 20)
  }
  return [...minutes.values()].map((values) => round(median(values)))
}

/** One chart per slot, on one scale: `#` its first process, `+` the one that replaced it. */
function renderPlots(slots, { reloadAt, restarts, xMax }) {
  const highest = Math.max(...slots.flatMap((slot) => slot.flatMap((life) => life.samples.map(({ value }) => value / 2 ** 20))), 1)
  const yMax = Math.ceil(highest / 50) * 50
  const lines = [
    `RSS of each gateway (MiB) over the run; ${round(xMax / PLOT_WIDTH)} s a column, ${round(yMax / PLOT_HEIGHT)} MiB a row, each column from its least to its greatest sample.`,
    `# the slot's first process, + its replacement; on the time axis R the reload (SIGHUP to all), ^ this slot's restart (SIGTERM to #).`
  ]
  for (const [index, slot] of slots.entries()) {
    const pids = slot.map((life, order) => `${order === 0 ? '#' : '+'} pid ${life.gateway.handle.pid}`).join(', ')
    lines.push('', `gateway-${index + 1} (${pids})`)
    const series = slot.map((life, order) => ({ symbol: order === 0 ? '#' : '+', samples: life.samples.map(({ t, value }) => ({ t, value: value / 2 ** 20 })) }))
    const events = [{ t: reloadAt, symbol: 'R' }, ...restarts.filter((restart) => restart.slot === index + 1).map((restart) => ({ t: restart.at, symbol: '^' }))]
    lines.push(...plotTimeSeries({ series, events, xMax, yMax, width: PLOT_WIDTH, height: PLOT_HEIGHT }))
  }
  return lines
}

/**
 * One chart of heap used per slot, on one scale: `#` and `+` as in the RSS charts; on the time
 * axis G where a major GC happened (R and ^ win a shared column), and the count of major GCs in
 * each minute under it.
 */
function renderHeapPlots(slots, { reloadAt, restarts, xMax }) {
  const highest = Math.max(...slots.flatMap((slot) => slot.flatMap((life) => life.heap.map(({ value }) => value / 2 ** 20))), 1)
  const yMax = Math.ceil(highest / 50) * 50
  const lines = [
    '',
    `Heap used of each gateway (MiB, v4gw_nodejs_heap_size_used_bytes from its /metrics); ${round(xMax / PLOT_WIDTH)} s a column, ${round(yMax / PLOT_HEIGHT)} MiB a row.`,
    `# and + as above; on the time axis G a major GC (v4gw_nodejs_gc_duration_seconds_count{kind="major"} went up), R the reload, ^ the restart.`
  ]
  for (const [index, slot] of slots.entries()) {
    const pids = slot.map((life, order) => `${order === 0 ? '#' : '+'} pid ${life.gateway.handle.pid}`).join(', ')
    lines.push('', `gateway-${index + 1} heap (${pids})`)
    const series = slot.map((life, order) => ({ symbol: order === 0 ? '#' : '+', samples: life.heap.map(({ t, value }) => ({ t, value: value / 2 ** 20 })) }))
    const gcTimes = slot.flatMap((life) => majorGcTimes(life.gcs))
    const events = [
      ...gcTimes.map((t) => ({ t, symbol: 'G' })),
      { t: reloadAt, symbol: 'R' },
      ...restarts.filter((restart) => restart.slot === index + 1).map((restart) => ({ t: restart.at, symbol: '^' }))
    ]
    lines.push(...plotTimeSeries({ series, events, xMax, yMax, width: PLOT_WIDTH, height: PLOT_HEIGHT }))
    lines.push(`major GCs a minute: ${perMinute(gcTimes, xMax).join(' ')}`)
  }
  return lines
}

function mib(bytes) {
  return Math.round((bytes / 1024 / 1024) * 10) / 10
}

function round(value) {
  return Math.round(value * 10) / 10
}

function sleepUntil(startedAt, deadline, fraction) {
  const at = startedAt + (deadline - startedAt) * fraction
  return sleep(Math.max(0, at - Date.now()))
}

main()
  .then(async (code) => {
    await stopAll()
    rmSync(dir, { recursive: true, force: true })
    process.exit(code)
  })
  .catch(async (error) => {
    console.error(error)
    await stopAll()
    rmSync(dir, { recursive: true, force: true })
    process.exit(1)
  })
