import { execFile } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { createTempDir } from '../helpers/temp-dir.js'

interface SoakReport {
  gateways: number
  requests: { sent: number; ok: number; lost: number }
  reload: { gateways: { gateway: string; took: boolean }[] }
  restarts: { slot: number; oldPid: number; newPid: number; exit: { code: number | null } }[]
  rss: { slot: number; withinLimit: boolean }[]
  memory: { slot: number; majorGcs: number; plateau: boolean | null; notJudged: string | null }[]
  samples: { pid: number; rssMiB: [number, number][]; heapUsedMiB: [number, number][]; majorGcs: [number, number][] }[][]
}

/*
 * The soak (docs/soak.md) as a smoke run of its machinery, not a measurement: two gateways built
 * from dist/ (test/global-setup.ts), a few seconds of load, the reload to both (SIGHUP, SPEC 8),
 * and the rolling restart: each replaced by a new process that is ready before the old one gets
 * SIGTERM and drains (SPEC 9). Too short to judge a plateau (no major GC), which the report says
 * as `null` with the reason.
 */
describe('bench/soak.mjs', () => {
  it('reloads every gateway, restarts them one at a time with nothing lost, and draws each one\'s RSS and heap', async () => {
    const dir = await createTempDir('v4gw-soak-test-')
    const json = join(dir.path, 'soak.json')
    const script = fileURLToPath(new URL('../../bench/soak.mjs', import.meta.url))
    const args = [script, '--seconds', '6', '--gateways', '2', '--concurrency', '4', '--json', json]
    const { stdout } = await promisify(execFile)(process.execPath, args, { timeout: 100_000, maxBuffer: 16 * 1024 * 1024 })
    const report = JSON.parse(await readFile(json, 'utf8')) as SoakReport

    expect(report.gateways).toBe(2)
    expect(report.requests.ok).toBeGreaterThan(0)
    expect(report.requests.lost).toBe(0)
    expect(report.reload.gateways).toEqual([
      { gateway: 'gateway-1', took: true },
      { gateway: 'gateway-2', took: true }
    ])
    expect(report.restarts.map((restart) => [restart.slot, restart.exit.code])).toEqual([
      [1, 0],
      [2, 0]
    ])
    for (const restart of report.restarts) expect(restart.newPid).not.toBe(restart.oldPid)
    expect(report.rss.map((slot) => slot.withinLimit)).toEqual([true, true])
    expect(report.memory.map((slot) => slot.plateau)).toEqual([null, null])
    for (const slot of report.memory) expect(slot.notJudged).toMatch(/major GC/)
    // Each slot served by two processes in turn, each sampled while it served.
    for (const [index, slot] of report.samples.entries()) {
      expect(slot.map((life) => life.pid)).toEqual([report.restarts[index]?.oldPid, report.restarts[index]?.newPid])
      expect(slot[0]?.rssMiB.length).toBeGreaterThan(0)
      // Heap used and the count of major GCs, scraped from each process's admin /metrics.
      for (const life of slot) {
        expect(life.heapUsedMiB.length).toBeGreaterThan(0)
        for (const [, mib] of life.heapUsedMiB) expect(mib).toBeGreaterThan(1)
        expect(life.majorGcs.length).toBe(life.heapUsedMiB.length)
        for (const [, count] of life.majorGcs) expect(Number.isInteger(count)).toBe(true)
      }
    }

    // One chart per slot: a title with both pids, ten rows, and the time axis with the reload (R) and the slot's restart (^).
    for (const [index, restart] of report.restarts.entries()) {
      const lines = stdout.split('\n')
      const title = lines.indexOf(`gateway-${index + 1} (# pid ${restart.oldPid}, + pid ${restart.newPid})`)
      expect(title).toBeGreaterThan(-1)
      const rows = lines.slice(title + 1, title + 11)
      for (const row of rows) expect(row).toMatch(/^ *\d* \|[ #+]{72}$/)
      expect(rows.join('')).toContain('#')
      expect(lines[title + 11]).toMatch(/^ + \+[-R^]{72}$/)
      expect(lines[title + 11]).toContain('R')
      expect(lines[title + 11]).toContain('^')

      // And one of heap used, with its count of major GCs a minute under it.
      const heapTitle = lines.indexOf(`gateway-${index + 1} heap (# pid ${restart.oldPid}, + pid ${restart.newPid})`)
      expect(heapTitle).toBeGreaterThan(title)
      const heapRows = lines.slice(heapTitle + 1, heapTitle + 11)
      for (const row of heapRows) expect(row).toMatch(/^ *\d* \|[ #+]{72}$/)
      expect(heapRows.join('')).toContain('#')
      expect(lines[heapTitle + 11]).toMatch(/^ + \+[-RG^]{72}$/)
      expect(lines[heapTitle + 13]).toMatch(/^major GCs a minute: \d+$/)
    }
    expect(stdout).toMatch(/^soak: PASS$/m)
  }, 120_000)
})
