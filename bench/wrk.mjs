/* global process */
// wrk as the load generator (`--load wrk`, when installed; autocannon by default). wrk is C:
// it leaves more of the load core to the stub than autocannon does. One thread, so that it keeps
// to one core and its per-run ids stay unique.
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

function luaString(value) {
  return JSON.stringify(value)
}

/**
 * A wrk script sending `load`; `[<id>]` in the body and in header values becomes a fresh id per
 * request, as autocannon replaces it anywhere in the request (a keyed row's `idempotency-key`).
 */
function script({ method, headers, body, idReplacement }, runId) {
  const lines = [`wrk.method = ${luaString(method)}`]
  for (const [name, value] of Object.entries(headers ?? {})) lines.push(`wrk.headers[${luaString(name)}] = ${luaString(value)}`)
  if (body !== undefined) lines.push(`wrk.body = ${luaString(body)}`)
  if (idReplacement) {
    lines.push(
      // A prefix per wrk run: warm-up and measurement must not share ids (a miss must stay a miss).
      `local prefix = ${luaString(runId)}`,
      'local counter = 0',
      `local template = ${luaString(body ?? '')}`,
      'request = function()',
      '  counter = counter + 1',
      '  local id = prefix .. counter',
      '  local headers = {}',
      '  for name, value in pairs(wrk.headers) do headers[name] = (tostring(value):gsub("%[<id>%]", id)) end',
      '  return wrk.format(nil, nil, headers, (template:gsub("%[<id>%]", id)))',
      'end'
    )
  }
  return `${lines.join('\n')}\n`
}

function milliseconds(value, unit) {
  const number = Number(value)
  return unit === 'us' ? number / 1000 : unit === 's' ? number * 1000 : number
}

/** Parses `wrk --latency` output. */
function parse(output, durationSec) {
  const total = Number(/(\d+) requests in/.exec(output)?.[1] ?? NaN)
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0)
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output)
  const percentile = (label) => {
    const match = new RegExp(`\\s${label}%\\s+([\\d.]+)(us|ms|s)`).exec(output)
    return match === null ? NaN : milliseconds(match[1], match[2])
  }
  return {
    ok: total - non2xx,
    non2xx,
    errors: socket === null ? 0 : Number(socket[1]) + Number(socket[2]) + Number(socket[3]),
    timeouts: socket === null ? 0 : Number(socket[4]),
    p50Ms: percentile('50'),
    p99Ms: percentile('99'),
    durationSec
  }
}

export function runWrk({ url, method, headers, body, idReplacement, connections, durationSec }) {
  const dir = mkdtempSync(join(tmpdir(), 'v4gw-wrk-'))
  const scriptPath = join(dir, 'load.lua')
  writeFileSync(scriptPath, script({ method, headers, body, idReplacement }, `run${randomUUID().slice(0, 8)}-`))
  return new Promise((resolve, reject) => {
    // wrk counts a timeout only for an answer that came later than --timeout: a connection that
    // never answers is not seen (wrk 4.1 has no check of requests in flight, nor its Lua API a
    // connection to count answers by). The verdicts' stall check is autocannon's (load.mjs).
    const child = spawn('wrk', ['-t1', `-c${connections}`, `-d${durationSec}s`, '--latency', '--timeout', '2s', '-s', scriptPath, url], { stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk.toString('utf8')))
    child.stderr.on('data', (chunk) => (output += chunk.toString('utf8')))
    child.once('error', reject)
    child.once('exit', (code) => {
      rmSync(dir, { recursive: true, force: true })
      if (code === 0) resolve(parse(output, durationSec))
      else reject(new Error(`wrk exited with ${code}:\n${output}`))
    })
    // The runner stops this load process with SIGTERM (a timeout, Ctrl-C): wrk goes with it.
    const stop = () => child.kill('SIGKILL')
    process.once('exit', stop)
    for (const signal of ['SIGINT', 'SIGTERM']) {
      process.once(signal, () => {
        stop()
        process.exit(signal === 'SIGINT' ? 130 : 143)
      })
    }
  })
}
