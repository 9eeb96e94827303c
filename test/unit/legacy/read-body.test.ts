import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { readBody } from '../../../src/legacy/read-body.js'

// SPEC 10: a legacy body is read whole, at most limits.bodyBytes; over it, 413 before it is all held.
describe('readBody', () => {
  it('resolves with every chunk, joined', async () => {
    const stream = new PassThrough()
    const body = readBody(stream, undefined, 10)
    stream.write('abc')
    stream.end('def')
    expect((await body).toString()).toBe('abcdef')
  })

  it('refuses a declared length over the limit before reading, and a stream that runs over as soon as it does', async () => {
    await expect(readBody(new PassThrough(), '11', 10)).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' })
    const stream = new PassThrough()
    const body = readBody(stream, undefined, 4)
    stream.write('abc')
    stream.write('def')
    await expect(body).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' })
    // It stopped reading there: what arrives after waits unread.
    stream.write('ghi')
    expect(stream.isPaused()).toBe(true)
    expect(stream.listenerCount('data')).toBe(0)
  })

  it('rejects with a stream error or an abort, and ignores what the stream says after it settled', async () => {
    const failing = new PassThrough()
    const failed = readBody(failing, undefined, 10)
    failing.destroy(new Error('reset'))
    await expect(failed).rejects.toThrow('reset')

    const aborted = new PassThrough()
    const cut = readBody(aborted, undefined, 10)
    aborted.emit('aborted')
    await expect(cut).rejects.toMatchObject({ code: 'ECONNRESET' })

    const ended = new PassThrough()
    const whole = readBody(ended, undefined, 10)
    ended.end('ok')
    expect((await whole).toString()).toBe('ok')
    // An error after the end reaches the listener still on the stream, which ignores it (no throw).
    ended.emit('error', new Error('late'))
    ended.emit('aborted')
  })
})
