import type { IncomingHttpHeaders } from 'node:http'
import { stripHopByHop } from '../util/hop-by-hop.js'
import { getAtPointer, setAtPointer } from '../util/json-pointer.js'
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


function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/**
 * The upstream answer for a legacy client (SPEC 6): status and body as they came; a JSON
 * object body gets the `meta` fields it lacks, then `legacy.responseFields` copies.
 */
export function shapeLegacyResponse(statusCode: number, upstreamHeaders: IncomingHttpHeaders, body: Buffer, options: ShapeOptions): ShapedResponse {
  // RFC 9110 7.6.1 hop-by-hop fields stay behind, and content-length: the gateway sets it for the body it sends.
  const headers = stripHopByHop(upstreamHeaders) as Record<string, string | string[]>
  delete headers['content-length']
  const contentType = typeof upstreamHeaders['content-type'] === 'string' ? upstreamHeaders['content-type'] : undefined
  if (!isJsonContentType(contentType)) return { statusCode, headers, payload: body }
  let document: unknown
  try {
    document = JSON.parse(body.toString('utf8'))
  } catch {
    return { statusCode, headers, payload: body }
  }
  if (!isPlainObject(document)) return { statusCode, headers, payload: body }
  // It parsed as JSON, so it was not encoded; the body sent is the gateway's own bytes.
  delete headers['content-encoding']
  let changed = fillMeta(document, options)
  for (const { from, to } of options.responseFields) {
    const value = getAtPointer(document, from)
    if (value !== undefined) changed = setAtPointer(document, to, structuredClone(value)) || changed
  }
  // An answer that already had everything goes out as it came, without a second serialisation.
  return { statusCode, headers, payload: changed ? JSON.stringify(document) : body }
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
