import type { Socket } from 'node:net'
import { buildConnector } from 'undici'

/**
 * A connector that lets undici read past a `100 (Continue)` it did not ask for.
 *
 * RFC 9110 15.2: a client must parse an interim answer it did not expect, and a proxy passes the
 * final answer on. undici (7 and 8 alike) closes the connection on any 100 instead ("bad
 * response"), because it never sends `Expect: 100-continue`; the gateway never does either, so
 * every 100 it gets is unasked. This connector drops such 100 heads from the front of an answer
 * before undici's parser reads them; every other interim answer (103, 102) still reaches undici,
 * which reports it.
 *
 * It rests on two things undici does, which `test/integration/upstream-conformance.test.ts`
 * holds it to: its HTTP/1 parser takes the socket's bytes with `socket.read()`, and it writes a
 * request head as one string that starts with the method (body framing it writes as strings starts
 * with CR). With one request at a time on a connection (the pool's `pipelining: 1`), the first
 * bytes read after a request head are the start of its answer. Per request that costs a look at
 * the first status code; nothing is allocated unless a 100 is there.
 */
export function connectorSkippingUnaskedContinue(options: buildConnector.BuildOptions): buildConnector.connector {
  const connect = buildConnector(options)
  return (target, callback) => {
    connect(target, (error, socket) => {
      // undici calls back with the error alone (no socket) when the connection failed.
      if (error !== null && error !== undefined) return callback(error, null)
      skipUnaskedContinue(socket as Socket)
      callback(null, socket as Socket)
    })
  }
}

/** Where a head that is not a 100 starts: the bytes are the answer proper. */
const ANSWER = 0
/** The bytes so far could be a 100 whose head has not all arrived. */
const NEED_MORE = -1
/** A 100 head that never ends within undici's header-size limit is left to undici to refuse. */
const MAX_CONTINUE_HEAD_BYTES = 16 * 1024
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1')
// 'HTTP/1.' digit SP '100' (SP or CR): the status line of a 100, as far as it is needed.
const STATUS_PREFIX = Buffer.from('HTTP/1.', 'latin1')
const CONTINUE_STATUS_END = 13

function skipUnaskedContinue(socket: Socket): void {
  const read = socket.read
  const write = socket.write
  // From a request head's write until the first byte of its answer that is not a 100.
  let atAnswerStart = false
  // The start of a possible 100 whose head is still arriving.
  let held: Buffer | null = null

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- stands in for every overload of write
  socket.write = function writeNotingRequestHead(this: Socket, chunk: any, encoding?: any, callback?: any): boolean {
    if (typeof chunk === 'string' && isTokenStart(chunk.charCodeAt(0))) atAnswerStart = true
    return write.call(this, chunk, encoding, callback)
  } as Socket['write']

  socket.read = function readPastUnaskedContinue(this: Socket, size?: number): unknown {
    let bytes = read.call(this, size) as Buffer | null
    if (!atAnswerStart || size === 0) return bytes
    for (;;) {
      if (held !== null) {
        if (bytes === null) return null
        bytes = Buffer.concat([held, bytes])
        held = null
      }
      if (bytes === null) return null
      const end = continueHeadEnd(bytes)
      if (end === ANSWER) {
        atAnswerStart = false
        return bytes
      }
      if (end === NEED_MORE) held = bytes
      else if (end < bytes.length) {
        bytes = bytes.subarray(end)
        continue
      }
      // All of it was 100 heads, or the start of one: read on, or wait for more to arrive.
      bytes = read.call(this) as Buffer | null
    }
  } as Socket['read']
}

/** An uppercase letter: how every method undici writes on a request line starts. */
function isTokenStart(code: number): boolean {
  return code >= 0x41 && code <= 0x5a
}

/** The end of a 100 head at the front of `bytes`, or ANSWER when none is there, or NEED_MORE. */
function continueHeadEnd(bytes: Buffer): number {
  const known = Math.min(bytes.length, CONTINUE_STATUS_END)
  for (let index = 0; index < known; index++) {
    if (!continueStatusByte(index, bytes[index] as number)) return ANSWER
  }
  if (known < CONTINUE_STATUS_END) return NEED_MORE
  const end = bytes.indexOf(HEAD_END, CONTINUE_STATUS_END - 1)
  if (end !== -1) return end + HEAD_END.length
  return bytes.length > MAX_CONTINUE_HEAD_BYTES ? ANSWER : NEED_MORE
}

function continueStatusByte(index: number, byte: number): boolean {
  if (index < STATUS_PREFIX.length) return byte === STATUS_PREFIX[index]
  switch (index) {
    case 7:
      return byte >= 0x30 && byte <= 0x39
    case 8:
      return byte === 0x20
    case 9:
      return byte === 0x31
    case 10:
    case 11:
      return byte === 0x30
    default:
      // A reason phrase follows a space; without one the line may end at once.
      return byte === 0x20 || byte === 0x0d
  }
}
