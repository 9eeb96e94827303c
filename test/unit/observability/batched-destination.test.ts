import { pbkdf2 } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { closeSync, constants, existsSync, openSync, readFileSync, readSync } from 'node:fs'
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { createBatchedDestination } from '../../../src/observability/logger.js'
import { createTempDir } from '../../helpers/temp-dir.js'
import { until } from '../../helpers/until.js'

/*
 * The log's batches go to sonic-boom (pino.destination) and come back for reuse once sonic-boom
 * reports their bytes written (line-batcher.ts). Held here with real asynchronous writes to a
 * file: every line arrives once, whole and in order, across hundreds of reused batches.
 */
describe('the batched log destination', () => {
  it('writes every line whole and in order while its batches are reused', async () => {
    const dir = await createTempDir('v4gw-log-')
    const path = join(dir.path, 'gateway.log')
    const destination = createBatchedDestination(path)
    const lines: string[] = []
    for (let index = 0; index < 30_000; index++) {
      // Lengths that straddle batch ends differently each time; some multi-byte characters.
      const line = `{"level":30,"n":${index},"pad":"${'x'.repeat(index % 397)}${index % 7 === 0 ? 'é€😀' : ''}"}\n`
      lines.push(line)
      destination.stream.write(line)
      // Let sonic-boom's writes complete (and report) along the way, as a serving gateway's do.
      if (index % 2_000 === 0) await new Promise((resolve) => setImmediate(resolve))
    }
    ;(destination.stream as unknown as { flush(): void }).flush()
    const expected = lines.join('')
    const bytes = Buffer.byteLength(expected)
    await until(async () => (await stat(path)).size === bytes, 10_000)
    expect(await readFile(path, 'utf8')).toBe(expected)
  })

  // main.ts calls flushSync from the process's 'exit' handler: what it has not written by then is lost.
  it('has written every line when flushSync returns, also with no write under way before it', async () => {
    const dir = await createTempDir('v4gw-log-')
    const path = join(dir.path, 'gateway.log')
    const destination = createBatchedDestination(path, 600_000)
    // A first line written the usual way, once the file is open: then nothing is under way.
    const first = '{"level":30,"msg":"first"}\n'
    destination.stream.write(first)
    ;(destination.stream as unknown as { flush(): void }).flush()
    await until(() => existsSync(path) && readFileSync(path, 'utf8') === first, 2_000)
    const lines = ['{"level":30,"msg":"one"}\n', '{"level":30,"msg":"two"}\n']
    for (const line of lines) destination.stream.write(line)
    // Every thread of libuv's pool busy: a write handed to it now could not be done before the
    // read below, as none is at a process's exit.
    const busy = Array.from({ length: Number(process.env.UV_THREADPOOL_SIZE ?? 4) }, () => new Promise((resolve) => pbkdf2('p', 's', 300_000, 32, 'sha256', resolve)))
    destination.flushSync()
    expect(readFileSync(path, 'utf8')).toBe(first + lines.join(''))
    await Promise.all(busy)
    ;(destination.stream as unknown as { stop(): void }).stop()
  })

  it('hands on a batch only once it holds 256 KiB', async () => {
    const dir = await createTempDir('v4gw-log-')
    const path = join(dir.path, 'gateway.log')
    // No batch goes by age in this test, however slow the machine.
    const destination = createBatchedDestination(path, 600_000)
    const line = `{"level":30,"pad":"${'x'.repeat(1_000)}"}\n`
    // 200 lines of about 1 KiB: more than the 64 KiB batches of before, under the 256 KiB of now.
    for (let index = 0; index < 200; index++) destination.stream.write(line)
    await new Promise((resolve) => setTimeout(resolve, 30))
    expect((await stat(path)).size).toBe(0)
    for (let index = 0; index < 100; index++) destination.stream.write(line)
    await until(async () => (await stat(path)).size > 0)
    expect((await stat(path)).size).toBeLessThan(300 * Buffer.byteLength(line))
    destination.flushSync()
    expect((await stat(path)).size).toBe(300 * Buffer.byteLength(line))
    ;(destination.stream as unknown as { stop(): void }).stop()
  })
})

// SPEC 10: a reader that stops (a paused log shipper, a blocked log driver) costs lines, counted,
// never memory without bound. A FIFO nobody reads holds the one write under way; the rest waits.
describe('the batched log destination whose reader stops', () => {
  it('drops whole batches past its bound, counts their lines, and writes whole lines again once read', async () => {
    const dir = await createTempDir('v4gw-log-')
    const path = join(dir.path, 'stalled.fifo')
    execFileSync('mkfifo', [path])
    // The reader end, open but not read: the writer fills the pipe and waits.
    const reader = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK)
    const destination = createBatchedDestination(path, 10, 1024 * 1024)
    const line = `{"level":30,"msg":"request","pad":"${'x'.repeat(300)}"}\n`
    for (let index = 0; index < 20_000; index++) {
      destination.stream.write(line)
      if (index % 1_000 === 0) await new Promise((resolve) => setTimeout(resolve, 1))
    }
    ;(destination.stream as unknown as { flush(): void }).flush()
    // 6.5 MB written against a bound of 1 MiB (and 64 KiB in the pipe): most are dropped, counted.
    expect(destination.droppedLines()).toBeGreaterThan(10_000)
    const received: Buffer[] = []
    const chunk = Buffer.alloc(65_536)
    const readSome = (): void => {
      for (;;) {
        let read = 0
        try {
          read = readSync(reader, chunk)
        } catch {
          return
        }
        if (read === 0) return
        received.push(Buffer.from(chunk.subarray(0, read)))
      }
    }
    const accounted = (): number => Buffer.concat(received).length / line.length + destination.droppedLines()
    await until(() => {
      readSome()
      return accounted() === 20_000
    }, 10_000)
    const text = Buffer.concat(received).toString('utf8')
    // Whole lines only: a dropped batch takes its lines whole.
    expect(text.split('\n').slice(0, -1).every((one) => `${one}\n` === line)).toBe(true)
    closeSync(reader)
    ;(destination.stream as unknown as { stop(): void }).stop()
  })
})
