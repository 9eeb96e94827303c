/* global process, console, setTimeout, setInterval, clearInterval, URL */
// npm run soak: mixed legacy and native traffic at saturation against the real gateway process,
// with a config reload (SIGHUP) and then a rolling restart (SIGTERM to the running gateway while
// a new one takes the traffic) in the middle. Loopback only, bounded in time, ends only the
// processes it started (by PID). Exits non-zero if any accepted request was lost or the
// gateway's RSS grew without bound. Usage: npm run soak [-- --seconds 60 --json FILE]
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { stringify } from 'yaml'
import { productionNodeFlags } from './candidates.mjs'
import { killAllNow, startNode, stopAll, stopProcess } from './processes.mjs'

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '60' }, concurrency: { type: 'string', default: '64' }, json: { type: 'string' } } })
const SECONDS = Number(values.seconds)
const CONCURRENCY = Number(values.concurrency)
// RSS may settle higher than at warm-up (JIT, pools, the session map filling up); twice that, and
// at least 64 MiB more, is growth without bound for a 60 s run.
const RSS_GROWTH_LIMIT = (startBytes) => Math.max(startBytes * 2, startBytes + 64 * 1024 * 1024)
const ROOT = new URL('..', import.meta.url).pathname
const STATE_KEYS = 200

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
const GATEWAY_NODE_FLAGS = productionNodeFlags(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')))

async function startGateway(name, configPath) {
  const { handle, match } = await startNode({
    name,
    args: [...GATEWAY_NODE_FLAGS, join(ROOT, 'dist/cli.js'), '--config', configPath],
    ready: /v4gw listening on (\S+) \(admin (\S+)\)/
  })
  return { handle, url: match[1], adminUrl: match[2] }
}

function rssBytes(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024
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

/** A target the load goes to; swapped at the rolling restart, as a load balancer would on readiness. */
let target

async function worker(id, deadline) {
  let sequence = id
  while (Date.now() < deadline) {
    const current = target
    const request = nextRequest(sequence)
    sequence += CONCURRENCY
    counts.sent++
    const sentAt = Date.now()
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
        if (lostSamples.length < 20) lostSamples.push(`sent ${((sentAt - loadStartedAt) / 1000).toFixed(3)} s, failed ${((Date.now() - loadStartedAt) / 1000).toFixed(3)} s, ${request.kind} to ${current.name}: ${error.code ?? ''} ${error.message}`)
      }
    }
  }
}

async function main() {
  const startedAt = Date.now()
  loadStartedAt = startedAt
  const { handle: stub, match } = await startNode({ name: 'stub', args: [join(ROOT, 'bench/stub-upstream.mjs')], ready: /stub listening on (\S+)/ })
  const stubUrl = match[1]
  const configA = join(dir, 'a.yaml')
  writeFileSync(configA, stringify(gatewayConfig(stubUrl, 1)))
  const first = await startGateway('gateway-1', configA)
  target = { name: 'gateway-1', pool: new Pool(first.url, { connections: CONCURRENCY, pipelining: 1 }) }
  console.log(`soak: ${SECONDS} s, ${CONCURRENCY} concurrent, gateway-1 pid ${first.handle.pid} on ${first.url}`)

  const deadline = Date.now() + SECONDS * 1000
  const load = Promise.all(Array.from({ length: CONCURRENCY }, (_, id) => worker(id, deadline)))
  const rss = { first: [], second: [] }
  const sampler = setInterval(() => {
    if (!first.handle.exited) rss.first.push(rssBytes(first.handle.pid))
  }, 1000)

  // One third in: reload with a changed config (SIGHUP, SPEC 8).
  await sleepUntil(startedAt, deadline, 1 / 3)
  const reloadAt = Date.now() - startedAt
  process.kill(first.handle.pid, 'SIGHUP')

  // Two thirds in: rolling restart. A new gateway takes new requests; the old one gets SIGTERM
  // and must answer everything it accepted (SPEC 9: in-flight requests finish).
  await sleepUntil(startedAt, deadline, 2 / 3)
  const configB = join(dir, 'b.yaml')
  writeFileSync(configB, stringify(gatewayConfig(stubUrl, 2)))
  const second = await startGateway('gateway-2', configB)
  const old = target
  target = { name: 'gateway-2', pool: new Pool(second.url, { connections: CONCURRENCY, pipelining: 1 }) }
  const rssFirstEnd = rssBytes(first.handle.pid)
  const terminateAt = Date.now() - startedAt
  process.kill(first.handle.pid, 'SIGTERM')
  const firstExit = await first.handle.exitedPromise
  const secondSampler = setInterval(() => rss.second.push(rssBytes(second.handle.pid)), 1000)

  await load
  clearInterval(sampler)
  clearInterval(secondSampler)
  await old.pool.close()
  await target.pool.close()
  const rssSecondEnd = rssBytes(second.handle.pid)
  await stopProcess(second.handle)
  await stopProcess(stub)

  // Warm-up: the first samples include start-up and JIT; take the third second as the start.
  const rssFirstStart = rss.first[Math.min(2, rss.first.length - 1)] ?? rssFirstEnd
  const rssOk = rssFirstEnd <= RSS_GROWTH_LIMIT(rssFirstStart)
  const report = {
    seconds: SECONDS,
    concurrency: CONCURRENCY,
    requests: counts,
    lostSamples,
    events: { reloadAtMs: reloadAt, terminateAtMs: terminateAt, gateway1Exit: firstExit },
    rss: { gateway1StartMiB: mib(rssFirstStart), gateway1EndMiB: mib(rssFirstEnd), gateway1LimitMiB: mib(RSS_GROWTH_LIMIT(rssFirstStart)), gateway2EndMiB: mib(rssSecondEnd) },
    node: process.version
  }
  console.log(JSON.stringify(report, null, 2))
  if (values.json !== undefined) writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`)
  const problems = []
  if (counts.lost > 0) problems.push(`${counts.lost} accepted requests were lost`)
  if (firstExit.code !== 0) problems.push(`gateway-1 exited with ${firstExit.code ?? firstExit.signal} after SIGTERM`)
  if (!rssOk) problems.push(`gateway-1 RSS grew from ${mib(rssFirstStart)} to ${mib(rssFirstEnd)} MiB`)
  if (counts.ok === 0) problems.push('no request succeeded')
  console.log(problems.length === 0 ? 'soak: PASS' : `soak: FAIL\n- ${problems.join('\n- ')}`)
  return problems.length === 0 ? 0 : 1
}

function mib(bytes) {
  return Math.round((bytes / 1024 / 1024) * 10) / 10
}

function sleepUntil(startedAt, deadline, fraction) {
  const at = startedAt + (deadline - startedAt) * fraction
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())))
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
