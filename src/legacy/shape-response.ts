import type { IncomingHttpHeaders } from 'node:http'
import { stripHopByHop } from '../util/hop-by-hop.js'
import { getAtPointer, setAtPointer } from '../util/json-pointer.js'
import { isPlainObject } from '../util/is-plain-object.js'
import { hasCompleteMeta } from './complete-meta.js'
import { firstLossyNumber } from '../util/json-numbers.js'
import { isJsonContentType } from './parse-legacy-body.js'

export interface ShapedResponse {
  statusCode: number
  headers: Record<string, string | string[]>
  payload: Buffer | string
}

export interface ShapeOptions {
  requestId: string
  totalMs: number
  sessionId: string | undefined
  responseFields: readonly { from: string; to: string }[]
}

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

// RFC 9110 7.6.1 hop-by-hop fields stay behind, and content-length: the gateway sets it for the body it sends.
const LEFT_OUT_OF_ANSWER: ReadonlySet<string> = new Set(['content-length'])
// A body that parsed as JSON was not encoded, and the body sent is the gateway's own bytes.
const LEFT_OUT_OF_JSON_ANSWER: ReadonlySet<string> = new Set(['content-length', 'content-encoding'])
// A body the gateway wrote again is other bytes: a strong validator (RFC 9110 8.8.3) or a digest
// (RFC 9530, RFC 3230, RFC 1864) of the upstream's bytes would be false of them.
const LEFT_OUT_OF_REWRITTEN_ANSWER: ReadonlySet<string> = new Set([...LEFT_OUT_OF_JSON_ANSWER, 'etag', 'content-digest', 'repr-digest', 'digest', 'content-md5'])

/** An answer the gateway does not read into: status, headers and body as they came. */
function asItCame(statusCode: number, upstreamHeaders: IncomingHttpHeaders, body: Buffer): ShapedResponse {
  return { statusCode, headers: stripHopByHop(upstreamHeaders, LEFT_OUT_OF_ANSWER) as Record<string, string | string[]>, payload: body }
}

/**
 * The upstream answer for a legacy client (SPEC 6): status and body as they came; a JSON
 * object body gets the `meta` fields it lacks, then `legacy.responseFields` copies.
 */
export function shapeLegacyResponse(statusCode: number, upstreamHeaders: IncomingHttpHeaders, body: Buffer, options: ShapeOptions): ShapedResponse {
  const contentType = typeof upstreamHeaders['content-type'] === 'string' ? upstreamHeaders['content-type'] : undefined
  if (!isJsonContentType(contentType)) return asItCame(statusCode, upstreamHeaders, body)
  // The common answer already has its meta (contract part 2): it goes out as it came, unparsed;
  // parsing it was 5-7 % of a legacy request (docs/performance.md). With a content-encoding the
  // parsed path drops that header, so it is not taken then.
  if (options.responseFields.length === 0 && upstreamHeaders['content-encoding'] === undefined && hasCompleteMeta(body, options.sessionId !== undefined)) {
    return asItCame(statusCode, upstreamHeaders, body)
  }
  let document: unknown
  let text: string
  try {
    // Fatal: bytes that are not UTF-8 (another charset, or broken) would turn into U+FFFD on the
    // way through; such a body goes out as it came, its meta unfilled.
    text = UTF8.decode(body)
    document = JSON.parse(text)
  } catch {
    return asItCame(statusCode, upstreamHeaders, body)
  }
  if (!isPlainObject(document)) return asItCame(statusCode, upstreamHeaders, body)
  let changed = fillMeta(document, options)
  let payload: string
  try {
    const responseFields = options.responseFields
    // Indexed: the config is frozen, and for-of over a frozen array is several times slower.
    for (let index = 0; index < responseFields.length; index++) {
      const { from, to } = responseFields[index] as (typeof responseFields)[number]
      const value = getAtPointer(document, from)
      if (value !== undefined) changed = setAtPointer(document, to, structuredClone(value)) || changed
    }
    // An answer that already had everything goes out as it came, without a second serialisation.
    if (!changed) return { statusCode, headers: stripHopByHop(upstreamHeaders, LEFT_OUT_OF_JSON_ANSWER) as Record<string, string | string[]>, payload: body }
    // Serialised again, a number JSON cannot hold (a 20-digit id, 1e400) would change: the body
    // then goes out as it came, its meta unfilled, since SPEC 6 puts "as they came" first.
    if (firstLossyNumber(text) !== undefined) return asItCame(statusCode, upstreamHeaders, body)
    payload = JSON.stringify(document)
  } catch (error) {
    // Nesting too deep to copy or serialise (both recurse) is the same case: V4 has run the call,
    // so its answer goes out as it came rather than as a 500.
    if (error instanceof RangeError) return asItCame(statusCode, upstreamHeaders, body)
    throw error
  }
  return { statusCode, headers: stripHopByHop(upstreamHeaders, LEFT_OUT_OF_REWRITTEN_ANSWER) as Record<string, string | string[]>, payload }
}

/** Fills the `meta` fields SPEC 6 asks for where the upstream left them out; true when it changed anything. */
function fillMeta(document: Record<string, unknown>, options: ShapeOptions): boolean {
  let changed = false
  if (document.meta === undefined) {
    document.meta = {}
    changed = true
  }
  const meta = document.meta
  if (!isPlainObject(meta)) return changed
  if (meta.requestId === undefined) {
    meta.requestId = options.requestId
    changed = true
  }
  if (meta.timingMs === undefined) {
    meta.timingMs = {}
    changed = true
  }
  if (isPlainObject(meta.timingMs) && meta.timingMs.total === undefined) {
    meta.timingMs.total = options.totalMs
    changed = true
  }
  if (options.sessionId !== undefined && meta.sessionId === undefined) {
    meta.sessionId = options.sessionId
    changed = true
  }
  return changed
}
