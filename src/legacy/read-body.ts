import type { Readable } from 'node:stream'
import { GatewayError } from '../errors/registry.js'

/**
 * Reads a legacy body into memory, at most `limitBytes` (SPEC 10). A declared length over the
 * limit fails before a byte is read; a stream that runs over fails as soon as it does, so an
 * oversized body is never held whole.
 */
export async function readBody(stream: Readable | undefined, declaredLength: string | undefined, limitBytes: number): Promise<Buffer> {
  if (declaredLength !== undefined && Number(declaredLength) > limitBytes) throw tooLarge(limitBytes)
  if (stream === undefined) return Buffer.alloc(0)
  const chunks: Buffer[] = []
  let bytes = 0
  for await (const chunk of stream) {
    bytes += (chunk as Buffer).length
    if (bytes > limitBytes) {
      stream.pause()
      throw tooLarge(limitBytes)
    }
    chunks.push(chunk as Buffer)
  }
  return Buffer.concat(chunks, bytes)
}

function tooLarge(limitBytes: number): GatewayError {
  return new GatewayError('PAYLOAD_TOO_LARGE', `request body is larger than ${limitBytes} bytes`)
}
