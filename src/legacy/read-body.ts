import type { Readable } from 'node:stream'
import { GatewayError } from '../errors/registry.js'

/**
 * Reads a legacy body into memory, at most `limitBytes` (SPEC 10). A declared length over the
 * limit fails before a byte is read; a stream that runs over fails as soon as it does, so an
 * oversized body is never held whole.
 */
export function readBody(stream: Readable | null, declaredLength: string | undefined, limitBytes: number, beforeReading?: () => void): Promise<Buffer> {
  if (declaredLength !== undefined && Number(declaredLength) > limitBytes) return Promise.reject(tooLarge(limitBytes))
  if (stream === null) return Promise.resolve(Buffer.alloc(0))
  beforeReading?.()
  // Events rather than an async iterator: a body is one or two chunks, and the iterator's
  // machinery cost more than the reading. Not an async function: one returning this promise
  // would cost two more turns of the microtask queue per request.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let bytes = 0
    // Listeners added with on() and left on the request when it settles (only 'data' goes, to
    // stop reading at the limit): once()'s wrappers and four removals per request were most of
    // this function's cost, and the request is done with when its body is.
    let settled = false
    function onData(chunk: Buffer): void {
      if (settled) return
      bytes += chunk.length
      if (bytes > limitBytes) {
        settled = true
        stream!.off('data', onData)
        stream!.pause()
        reject(tooLarge(limitBytes))
        return
      }
      chunks.push(chunk)
    }
    function onEnd(): void {
      if (settled) return
      settled = true
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, bytes))
    }
    function onError(error: Error): void {
      if (settled) return
      settled = true
      reject(error)
    }
    function onAborted(): void {
      onError(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }))
    }
    stream.on('data', onData).on('end', onEnd).on('error', onError).on('aborted', onAborted)
  })
}

function tooLarge(limitBytes: number): GatewayError {
  return new GatewayError('PAYLOAD_TOO_LARGE', `request body is larger than ${limitBytes} bytes`)
}
