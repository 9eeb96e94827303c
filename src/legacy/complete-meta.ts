const QUOTE = 0x22
const BACKSLASH = 0x5c
const COLON = 0x3a
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d

const META = Buffer.from('meta')
const REQUEST_ID = Buffer.from('requestId')
const TIMING_MS = Buffer.from('timingMs')
const TOTAL = Buffer.from('total')
const SESSION_ID = Buffer.from('sessionId')

/** JSON's insignificant whitespace (RFC 8259 2). */
function isWhitespace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09
}

function skipWhitespace(body: Buffer, index: number): number {
  while (isWhitespace(body[index])) index++
  return index
}

// Byte by byte: the names are short, and Buffer#compare's native call cost more than the whole scan.
function nameEquals(body: Buffer, start: number, end: number, name: Buffer): boolean {
  if (end - start !== name.length) return false
  for (let offset = 0; offset < name.length; offset++) {
    if (body[start + offset] !== name[offset]) return false
  }
  return true
}

/**
 * Whether an upstream answer already holds every `meta` field SPEC 6 has the gateway fill in,
 * told from its bytes without parsing them: `meta.requestId`, `meta.timingMs.total`, and
 * `meta.sessionId` when `needsSessionId`. The V4 contract (part 2) has the first two always
 * present, so a conforming answer goes out as it came, and the gateway need not build the whole
 * document to learn that it has nothing to add.
 *
 * True is a promise only about bytes that are valid JSON: they are then an object whose one
 * top-level `meta` is an object with those members, and JSON.parse plus the fill would change
 * nothing. Bytes that are not valid JSON go out as they came either way, so nothing is
 * validated here. False sends the answer to the parser, which decides as before. It is false for
 * any escaped name at the levels where these keys are looked for (it might decode to one), for
 * `meta` or `timingMs` given twice (JSON.parse keeps the last), and, to keep the scan short, for
 * a `meta` or `timingMs` that is not an object (which the parser then leaves as it is).
 */
export function hasCompleteMeta(body: Buffer, needsSessionId: boolean): boolean {
  let index = skipWhitespace(body, 0)
  if (body[index] !== OPEN_OBJECT) return false
  let depth = 0
  // Depth of the `meta` object's members (2) while inside it, of `timingMs`'s (3) inside that;
  // else 0, a depth no member of a valid document has.
  let metaDepth = 0
  let timingDepth = 0
  let metas = 0
  let timings = 0
  let requestId = false
  let total = false
  let sessionId = false
  while (index < body.length) {
    const byte = body[index]
    if (byte === OPEN_OBJECT || byte === OPEN_ARRAY) {
      depth++
      index++
      continue
    }
    if (byte === CLOSE_OBJECT || byte === CLOSE_ARRAY) {
      if (depth === timingDepth) timingDepth = 0
      if (depth === metaDepth) metaDepth = 0
      depth--
      index++
      continue
    }
    if (byte !== QUOTE) {
      index++
      continue
    }
    // A string: find its closing quote, noting any escape in it.
    const start = index + 1
    let hasEscape = false
    index = start
    for (;;) {
      const inner = body[index]
      if (inner === undefined) return false
      if (inner === QUOTE) break
      if (inner === BACKSLASH) {
        hasEscape = true
        index++
      }
      index++
    }
    const end = index
    index = skipWhitespace(body, index + 1)
    // Only a name is followed by a colon; a string value is not.
    if (body[index] !== COLON) continue
    if (depth !== 1 && depth !== metaDepth && depth !== timingDepth) continue
    if (hasEscape) return false
    const valueStart = skipWhitespace(body, index + 1)
    if (depth === 1) {
      if (!nameEquals(body, start, end, META)) continue
      if (++metas > 1 || body[valueStart] !== OPEN_OBJECT) return false
      metaDepth = 2
    } else if (depth === metaDepth) {
      if (nameEquals(body, start, end, REQUEST_ID)) requestId = true
      else if (nameEquals(body, start, end, SESSION_ID)) sessionId = true
      else if (nameEquals(body, start, end, TIMING_MS)) {
        if (++timings > 1 || body[valueStart] !== OPEN_OBJECT) return false
        timingDepth = 3
      }
    } else if (nameEquals(body, start, end, TOTAL)) {
      total = true
    }
    index = valueStart
  }
  return metas === 1 && requestId && total && (sessionId || !needsSessionId)
}
