import { execFile } from 'node:child_process'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterEach, describe, expect, it } from 'vitest'

/*
 * bench/load.mjs, the load generator of `npm run bench` and `bench:compare`, against small
 * loopback servers: what it counts is what the goals' verdicts and the 1 % failure check read.
 */
const LOAD = fileURLToPath(new URL('../../bench/load.mjs', import.meta.url))

interface LoadResult {
  ok: number
  non2xx: number
  errors: number
  timeouts: number
  stalled: number
}

let server: Server | undefined
afterEach(async () => {
  server?.closeAllConnections()
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined))
  server = undefined
})

async function serve(handler: (request: IncomingMessage, response: ServerResponse) => void): Promise<string> {
  server = createServer(handler)
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

async function runLoad(spec: Record<string, unknown>): Promise<LoadResult> {
  const full = { method: 'POST', connections: 4, warmupSec: 0.2, durationSec: 1, measuredPid: process.pid, otherPids: [], ...spec }
  const { stdout } = await promisify(execFile)(process.execPath, [LOAD, JSON.stringify(full)], { timeout: 30_000 })
  return JSON.parse(stdout.trim().split('\n').at(-1) as string) as LoadResult
}

describe('bench/load.mjs', () => {
  it('counts a connection left unanswered to the end as a failure, not a hole in the percentiles', async () => {
    // The third connection to arrive is never answered; the others are, at once.
    let connections = 0
    const url = await serve((request, response) => {
      request.resume()
      const socket = request.socket as typeof request.socket & { ordinal?: number }
      socket.ordinal ??= ++connections
      if (socket.ordinal !== 3) response.end('{}')
    })
    const result = await runLoad({ url: `${url}/`, body: '{}' })
    expect(result.ok).toBeGreaterThan(0)
    // Counted at the end as stalled; or, on a machine so busy that the run outlasted autocannon's
    // 2 s timeout, as a timeout (autocannon then reconnects, and the new connection is answered).
    expect(result.stalled + result.timeouts).toBeGreaterThanOrEqual(1)
  }, 40_000)

  it('counts a connection that answered, then hung for longer than 2 s, as a failure', async () => {
    // The third connection gets one answer, then none: autocannon's 2 s timeout must see it.
    let connections = 0
    const url = await serve((request, response) => {
      request.resume()
      const socket = request.socket as typeof request.socket & { ordinal?: number; answered?: boolean }
      socket.ordinal ??= ++connections
      if (socket.ordinal === 3 && socket.answered === true) return
      socket.answered = true
      response.end('{}')
    })
    const result = await runLoad({ url: `${url}/`, body: '{}', warmupSec: 0.2, durationSec: 3 })
    expect(result.ok).toBeGreaterThan(0)
    expect(result.timeouts + result.stalled).toBeGreaterThanOrEqual(1)
  }, 40_000)

  it('counts none when every connection is answered', async () => {
    const url = await serve((request, response) => {
      request.resume()
      response.end('{}')
    })
    const result = await runLoad({ url: `${url}/`, body: '{}' })
    expect(result.ok).toBeGreaterThan(0)
    expect(result).toMatchObject({ non2xx: 0, errors: 0, timeouts: 0, stalled: 0 })
  }, 40_000)

  // The keyed rows send `idempotency-key: [<id>]`: each request must claim a key of its own with
  // either generator (autocannon replaces the id anywhere in the request; the wrk script must too).
  for (const generator of ['autocannon', 'wrk']) {
    it(`gives every request a fresh [<id>] in its headers and body (${generator})`, async () => {
      const seen: { key: string | undefined; body: string }[] = []
      const url = await serve((request, response) => {
        let body = ''
        request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')))
        request.on('end', () => {
          seen.push({ key: request.headers['idempotency-key'] as string | undefined, body })
          response.end('{}')
        })
      })
      const result = await runLoad({
        url: `${url}/`,
        generator,
        headers: { 'content-type': 'application/json', 'idempotency-key': '[<id>]' },
        body: '{"stateId":"[<id>]"}',
        idReplacement: true,
        warmupSec: 0
      })
      expect(result.ok).toBeGreaterThan(10)
      const keys = seen.map((request) => request.key)
      expect(keys.every((key) => key !== undefined && key !== '[<id>]' && key.length > 0)).toBe(true)
      expect(new Set(keys).size).toBe(keys.length)
      expect(seen.every((request) => !request.body.includes('[<id>]'))).toBe(true)
    }, 40_000)
  }
})
