import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { testConfig } from '../helpers/start-gateway.js'

/** A path in dist/, as a JavaScript string literal for a child's script. */
const dist = (path: string): string => JSON.stringify(fileURLToPath(new URL(`../../dist/${path}`, import.meta.url)))

describe('a program that embeds the gateway (package main: buildGateway)', () => {
  const upstream = useRecordingUpstream()

  // SPEC 9 and 17: a line per request. The gateway's own logger batches lines for up to 250 ms;
  // an embedder that exits once close() returns must still find its last request's line written.
  it('gets every line written by close() when it gave no logger, though it exits right after', async () => {
    const config = testConfig(upstream.url, { log: { level: 'info' } })
    const script = `
      const { buildGateway } = await import(${dist('app.js')})
      const { configSchema } = await import(${dist('config/schema.js')})
      const gateway = await buildGateway({ config: configSchema.parse(${JSON.stringify(config)}) })
      const { trafficUrl } = await gateway.listen({ host: '127.0.0.1', trafficPort: 0, adminPort: 0 })
      const answer = await fetch(new URL('/v4/embedded-last', trafficUrl), { headers: { authorization: 'Bearer demo-token-alice', 'x-request-id': 'embedded-last-1', connection: 'close' } })
      await answer.text()
      // No connection left to drain: close() returns within milliseconds, inside the batch's 250.
      await gateway.close()
      process.exit(answer.status === 200 ? 0 : 4)
    `
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')))
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    expect(code, stderr).toBe(0)
    const lines = stdout.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'request', requestId: 'embedded-last-1', status: 200 }))
  })
})
