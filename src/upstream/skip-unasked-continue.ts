import type { Socket } from 'node:net'
import { buildConnector } from 'undici'

/**
 * A connector that lets undici read past a `100 (Continue)` it did not ask for.
 *
 * RFC 9110 15.2: a client must parse an interim answer it did not expect, and a proxy passes the
 * final answer on. undici (7 and 8 alike) closes the connection on any 100 instead ("bad
 * response"), because it never sends `Expect: 100-continue`; the gateway never does either, so
 * every 100 it gets is unasked. This connector drops such 100 heads from the front of an answer,
 * before or between other interim answers, before undici's parser reads them; every other interim
 * answer (103, 102) still reaches undici, which reports it.
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

/** The bytes start a final answer (or a 101, which undici judges): nothing more to look at. */
const FINAL = 0
/** The bytes so far could be an interim head that has not all arrived. */
const NEED_MORE = -1
/** An interim head that never ends within undici's header-size limit is left to undici to refuse. */
const MAX_INTERIM_HEAD_BYTES = 16 * 1024
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1')
// 'HTTP/1.' digit SP '1' digit digit (SP or CR): an interim status line, as far as it is needed.
const STATUS_PREFIX = Buffer.from('HTTP/1.', 'latin1')
const INTERIM_STATUS_END = 13

function skipUnaskedContinue(socket: Socket): void {
  const read = socket.read
  const write = socket.write
  // From a request head's write until the start of its final answer.
  let atAnswerStart = false
  // The start of a possible interim head that is still arriving.
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
      const end = interimHeadEnd(bytes)
      if (end === FINAL) {
        atAnswerStart = false
        return bytes
      }
      if (end !== NEED_MORE && !isContinue(bytes)) {
        // Another interim answer (a 103): undici reads it, and what follows is looked at next.
        if (end === bytes.length) return bytes
        this.unshift(bytes.subarray(end))
        return bytes.subarray(0, end)
      }
      if (end === NEED_MORE) held = bytes
      else if (end < bytes.length) {
        bytes = bytes.subarray(end)
        continue
      }
      // All of it was a 100, or the start of an interim head: read on, or wait for more to arrive.
      bytes = read.call(this) as Buffer | null
    }
  } as Socket['read']
}

/** An uppercase letter: how every method undici writes on a request line starts. */
function isTokenStart(code: number): boolean {
  return code >= 0x41 && code <= 0x5a
}

/** The end of an interim head (other than a 101) at the front of `bytes`, or FINAL, or NEED_MORE. */
function interimHeadEnd(bytes: Buffer): number {
  const known = Math.min(bytes.length, INTERIM_STATUS_END)
  for (let index = 0; index < known; index++) {
    if (!interimStatusByte(index, bytes[index] as number)) return FINAL
  }
  if (known < INTERIM_STATUS_END) return NEED_MORE
  // 101 (Switching Protocols) ends the exchange as HTTP/1: undici refuses one it did not ask for.
  if (bytes[10] === 0x30 && bytes[11] === 0x31) return FINAL
  const end = bytes.indexOf(HEAD_END, INTERIM_STATUS_END - 1)
  if (end !== -1) return end + HEAD_END.length
  return bytes.length > MAX_INTERIM_HEAD_BYTES ? FINAL : NEED_MORE
}

/** Whether a whole interim head at the front of `bytes` is a 100. */
function isContinue(bytes: Buffer): boolean {
  return bytes[10] === 0x30 && bytes[11] === 0x30
}

function interimStatusByte(index: number, byte: number): boolean {
  if (index < STATUS_PREFIX.length) return byte === STATUS_PREFIX[index]
  switch (index) {
    case 8:
      return byte === 0x20
    case 9:
      return byte === 0x31
    case 7:
    case 10:
    case 11:
      return byte >= 0x30 && byte <= 0x39
    default:
      // A reason phrase follows a space; without one the line may end at once.
      return byte === 0x20 || byte === 0x0d
  }
}
