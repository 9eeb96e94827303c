import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterEach, describe, expect, it } from 'vitest'
// @ts-expect-error -- a plain .mjs script of the benchmark, without types
import { CANDIDATES } from '../../../bench/candidates.mjs'

type Candidate = { name: string; load: { path: string }; check: (name: string, baseUrl: string, load: unknown) => Promise<void> }
const candidates = CANDIDATES as Candidate[]

let server: Server | undefined
afterEach(() => {
  server?.close()
  server = undefined
})

/** A loopback server whose answer to every call is `answer(body)`; resolves with its URL. */
async function serve(answer: (body: string) => { status: number; body: unknown; sessionId?: string }): Promise<string> {
  server = createServer((request, response) => {
    let body = ''
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')))
    request.on('end', () => {
      const { status, body: json, sessionId } = answer(body)
      response.writeHead(status, { 'content-type': 'application/json', ...(sessionId === undefined ? {} : { 'x-v4-session-id': sessionId }) })
      response.end(JSON.stringify(json))
    })
  })
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server?.address() as AddressInfo).port}`
}

/*
 * The bench (docs/performance.md) checks each candidate's first answer before loading it, and one run prints
 * the rows side by side as ratios and writes `--json FILE` as
 * { candidates: { NAME: { rps, p50Ms, p99Ms, cpuUsPerReq } } }.
 */
describe('bench/candidates.mjs first-answer checks', () => {
  it.each(candidates.map((candidate) => [candidate.name, candidate] as const))('%s refuses an answer that is not an execution', async (name, candidate) => {
    const url = await serve(() => ({ status: 200, body: { error: { code: 'NOT_AN_EXECUTION' } } }))
    await expect(candidate.check(name, url, candidate.load)).rejects.toThrow(`${name}: first answer is wrong`)
  })

  it.each(candidates.map((candidate) => [candidate.name, candidate] as const))('%s accepts an execution answer, with a session per state key', async (name, candidate) => {
    // The same body (state key) gets the same session, another one another: a hit and a miss as the gateway answers them.
    const url = await serve((body) => ({ status: 200, body: { output: 'ok', meta: { requestId: 'r' } }, sessionId: `ses_${createHash('sha256').update(body).digest('hex').slice(0, 12)}` }))
    await expect(candidate.check(name, url, candidate.load)).resolves.toBeUndefined()
  })
})

describe('bench/run.mjs', () => {
  it('measures the rows in one run, prints their ratios and goal verdicts, and writes --json', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'v4gw-bench-'))
    try {
      const json = join(dir, 'bench.json')
      const rows = ['direct', 'fastify-http-proxy', 'gateway-native', 'gateway-execute', 'gateway-session-hit']
      const script = fileURLToPath(new URL('../../../bench/run.mjs', import.meta.url))
      const args = [script, '--only', rows.join(','), '--rounds', '1', '--duration', '0.5', '--warmup', '0.25', '--connections', '4', '--no-memory', '--json', json]
      const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: 80_000, maxBuffer: 16 * 1024 * 1024 })
      const report = JSON.parse(await readFile(json, 'utf8')) as { candidates: Record<string, Record<string, number>> }
      expect(Object.keys(report.candidates).sort()).toEqual([...rows].sort())
      for (const row of rows) {
        const measured = report.candidates[row] as Record<string, number>
        expect(Object.keys(measured).sort()).toEqual(['cpuUsPerReq', 'p50Ms', 'p99Ms', 'rps'])
        for (const value of Object.values(measured)) expect(value).toBeGreaterThan(0)
      }
      expect(stdout).toMatch(/\| row +\| req\/s \| p50 ms \| p99 ms \| CPU µs\/req \|.*\| vs proxy \| vs direct \|/)
      // The verdicts are printed whatever they are: no test reads a timing as pass or fail.
      for (const goal of ['gateway-native req/s', 'gateway-execute req/s', 'gateway-session-hit req/s', 'gateway-native p99']) {
        expect(stdout).toMatch(new RegExp(`^(PASS|FAIL) ${goal} `, 'm'))
      }
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  }, 90_000)
})
