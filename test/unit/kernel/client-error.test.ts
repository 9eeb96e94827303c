import { EventEmitter } from 'node:events'
import { PassThrough } from 'node:stream'
import { pino } from 'pino'
import { describe, expect, it } from 'vitest'
import { answerClientError } from '../../../src/kernel/client-error.js'
import { isClosing, markClosing } from '../../../src/kernel/connection-close.js'

const log = pino({ level: 'silent' })
const parseError = (code: string): Error & { code: string } => Object.assign(new Error('parse error'), { code })

/** A connection as answerClientError sees it: what is written to it, and node:http's response in progress (`_httpMessage`). */
function connection(current?: { headersSent: boolean; writableEnded: boolean; complete: boolean }) {
  const socket = new PassThrough() as PassThrough & { _httpMessage?: unknown }
  const written: string[] = []
  const end = socket.end.bind(socket)
  socket.end = ((chunk?: unknown, callback?: () => void) => {
    if (typeof chunk === 'string') written.push(chunk)
    return end(typeof chunk === 'function' ? chunk : callback)
  }) as typeof socket.end
  const response = Object.assign(new EventEmitter(), current === undefined ? {} : { headersSent: current.headersSent, writableEnded: current.writableEnded, req: { complete: current.complete } })
  if (current !== undefined) socket._httpMessage = response
  return { socket, written, response }
}

describe('answerClientError: one answer per request, then the connection closes', () => {
  it('answers a malformed request on an idle connection, and marks the connection closing', () => {
    const { socket, written } = connection()
    answerClientError(log, parseError('HPE_INVALID_METHOD'), socket)
    expect(written).toEqual([expect.stringMatching(/^HTTP\/1\.1 400 Bad Request\r\n[^]*connection: close\r\n/)])
    expect(isClosing(socket)).toBe(true)
  })

  it('writes nothing on a connection whose last answer is already decided (a refused head, Transfer-Encoding: xchunked)', () => {
    const { socket, written } = connection({ headersSent: true, writableEnded: true, complete: false })
    markClosing(socket)
    answerClientError(log, parseError('HPE_INVALID_TRANSFER_ENCODING'), socket)
    expect(written).toEqual([])
    expect(socket.destroyed).toBe(false)
  })

  it('does not answer again a framing error in the body of a request that has its answer: it closes once that answer has gone', () => {
    const { socket, written, response } = connection({ headersSent: true, writableEnded: true, complete: false })
    answerClientError(log, parseError('HPE_INVALID_CHUNK_SIZE'), socket)
    expect(socket.writableEnded).toBe(false)
    socket._httpMessage = null
    response.emit('finish')
    expect(written).toEqual([])
    expect(socket.writableEnded).toBe(true)
  })

  it('cuts an answer under way whose request body turns out malformed', () => {
    const { socket, written } = connection({ headersSent: true, writableEnded: false, complete: false })
    answerClientError(log, parseError('HPE_INVALID_CHUNK_SIZE'), socket)
    expect(written).toEqual([])
    expect(socket.destroyed).toBe(true)
  })

  it('answers a framing error in the body of a request not answered yet at once: that is its answer', () => {
    const { socket, written } = connection({ headersSent: false, writableEnded: false, complete: false })
    answerClientError(log, parseError('HPE_INVALID_CHUNK_SIZE'), socket)
    expect(written).toHaveLength(1)
  })

  it('answers a malformed request pipelined behind another only once that one’s answer has finished', () => {
    const { socket, written, response } = connection({ headersSent: true, writableEnded: false, complete: true })
    answerClientError(log, parseError('HPE_INVALID_HEADER_TOKEN'), socket)
    expect(written).toEqual([])
    expect(socket.destroyed).toBe(false)
    socket._httpMessage = null
    response.emit('finish')
    expect(written).toEqual([expect.stringMatching(/^HTTP\/1\.1 400 /)])
  })

  it('answers nothing sent after a request that asked to close, and closes after that request’s answer', () => {
    const { socket, written, response } = connection({ headersSent: false, writableEnded: false, complete: true })
    answerClientError(log, parseError('HPE_CLOSED_CONNECTION'), socket)
    socket._httpMessage = null
    response.emit('finish')
    expect(written).toEqual([])
    expect(socket.writableEnded).toBe(true)
  })
})
