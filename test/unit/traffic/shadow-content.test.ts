import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import { describe, expect, it } from 'vitest'
import { decodedContent } from '../../../src/traffic/shadow-content.js'

const JSON_TEXT = JSON.stringify({ output: { text: 'done' }, items: [1, 2, 3] })

function answer(body: Buffer, contentEncoding?: string) {
  return { statusCode: 200, contentType: 'application/json', contentEncoding, body }
}

describe('an answer\'s content as a shadow comparison reads it (SPEC 15)', () => {
  it('decodes gzip, x-gzip, deflate and br, whatever the coding\'s case and spaces', async () => {
    for (const [coding, bytes] of [
      ['gzip', gzipSync(JSON_TEXT)],
      [' X-GZIP ', gzipSync(JSON_TEXT)],
      ['deflate', deflateSync(JSON_TEXT)],
      ['br', brotliCompressSync(JSON_TEXT)]
    ] as const) {
      const decoded = await decodedContent(answer(bytes, coding), 1_000)
      expect(decoded).not.toBe('skipped')
      expect((decoded as { body: Buffer }).body.toString()).toBe(JSON_TEXT)
      expect((decoded as { contentEncoding?: string }).contentEncoding).toBeUndefined()
    }
  })

  it('leaves an answer without a coding, with identity, with one Node cannot undo, or with several as it came', async () => {
    for (const coding of [undefined, 'identity', 'zstd', 'gzip, br']) {
      const plain = answer(Buffer.from(JSON_TEXT), coding)
      expect(await decodedContent(plain, 1_000)).toBe(plain)
    }
  })

  it('compares bytes that do not decode as they came, and skips content over maxBodyBytes once decoded', async () => {
    const broken = answer(Buffer.from('not gzip at all'), 'gzip')
    expect(await decodedContent(broken, 1_000)).toBe(broken)
    // 200 KB of one byte compresses to a few hundred: the limit is on what it decodes to.
    const bomb = answer(gzipSync(Buffer.alloc(200_000, 0x61)), 'gzip')
    expect(bomb.body.length).toBeLessThan(1_000)
    expect(await decodedContent(bomb, 100_000)).toBe('skipped')
    expect(await decodedContent(bomb, 200_000)).not.toBe('skipped')
  })
})
