import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const script = fileURLToPath(new URL('../../../bench/memory.mjs', import.meta.url))

/*
 * `npm run bench` measures the session map last, after ten minutes of load: a script that no
 * longer fits the built modules (a changed signature) would fail only then. A small run here
 * keeps it in step with dist/ (built by test/global-setup.ts).
 */
describe('bench/memory.mjs', () => {
  it('fills a session store and reports its bytes per entry', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', script, '2000'], { timeout: 30_000 })
    const report = JSON.parse(stdout) as { entries: number; heapBytesPerEntry: number; rssBytesPerEntry: number; registry: { clients: number; heapBytesPerClient: number } }
    expect(report.entries).toBe(2000)
    // SPEC 12's client registry at as many clients: at most 1 KiB each (docs/performance.md has the 100,000 figure).
    expect(report.registry.clients).toBe(2000)
    expect(report.registry.heapBytesPerClient).toBeLessThan(1024)
    expect(report.heapBytesPerEntry).toBeGreaterThan(0)
    expect(Number.isFinite(report.rssBytesPerEntry)).toBe(true)
  })
})
