import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { createTempDir } from '../helpers/temp-dir.js'

/*
 * One run of the bench (docs/performance.md) prints the rows side by side as ratios, with the
 * goals' verdicts, and writes `--json FILE` as { candidates: { NAME: { rps, p50Ms, p99Ms, cpuUsPerReq } } }.
 * It starts the built gateway (dist/, made by test/global-setup.ts), the stub upstream, the
 * reference proxy and the load generator as processes of their own: an integration test.
 */
describe('bench/run.mjs', () => {
  // A smoke run of the machinery, not a measurement: each row once, a 0.1 s warm-up and a 0.3 s
  // window, and no window measured again for other work on the machine (a full run does that,
  // which on a busy machine made this test take a minute).
  it('measures the rows in one run, prints their ratios and goal verdicts, and writes --json', async () => {
    const dir = await createTempDir('v4gw-bench-')
    const json = join(dir.path, 'bench.json')
    // gateway-execute-traced-all: a traced row starts its collector (bench/otlp-sink.mjs) too.
    const rows = ['direct', 'fastify-http-proxy-tuned', 'gateway-native', 'gateway-native-quiet', 'gateway-execute', 'gateway-execute-traced-all', 'gateway-session-hit']
    const script = fileURLToPath(new URL('../../bench/run.mjs', import.meta.url))
    const args = [script, '--only', rows.join(','), '--rounds', '1', '--duration', '0.3', '--warmup', '0.1', '--remeasures', '0', '--connections', '4', '--no-memory', '--json', json]
    // Each row starts processes of its own (about 4 s a row here, 8.5 s on a CI machine running
    // other test files at once): the timeout leaves room for a machine twice as slow as that.
    const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: 150_000, maxBuffer: 16 * 1024 * 1024 })
    const report = JSON.parse(await readFile(json, 'utf8')) as { candidates: Record<string, Record<string, number>> }
    expect(Object.keys(report.candidates).sort()).toEqual([...rows].sort())
    for (const row of rows) {
      const measured = report.candidates[row] as Record<string, number>
      expect(Object.keys(measured).sort()).toEqual(['cpuUsPerReq', 'p50Ms', 'p99Ms', 'rps'])
      for (const value of Object.values(measured)) expect(value).toBeGreaterThan(0)
    }
    expect(stdout).toMatch(/\| row +\| req\/s \| p50 ms \| p99 ms \| CPU µs\/req \|.*\| vs tuned ref \| vs direct \|/)
    // The verdicts are printed whatever they are, against the reference with the gateway's own
    // Node flags: no test reads a timing as pass or fail.
    for (const goal of [
      'gateway-native req/s = [\\d.]+x fastify-http-proxy-tuned,',
      'gateway-execute req/s',
      'gateway-session-hit req/s',
      'gateway-native p99',
      'gateway-native CPU per request = [\\d.]+x gateway-native-quiet',
      'gateway-execute-traced-all req/s = [\\d.]+x gateway-execute'
    ]) {
      expect(stdout).toMatch(new RegExp(`^(PASS|FAIL) ${goal} `, 'm'))
    }
  }, 160_000)
})
