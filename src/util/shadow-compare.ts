import { createHash } from 'node:crypto'
import { exactNumbers, firstLossyNumber } from './json-numbers.js'

/**
 * SPEC 15 "Comparing" and "No content kept", as pure functions: a shadow comparison's two
 * answers in, the pointers where they differ out, already in the recorded form that names a
 * place and never holds a value.
 */

/** One answer of a comparison: the legacy side's (primary) or the translation's (candidate). */
export interface ComparedAnswer {
  readonly statusCode: number
  readonly contentType: string | undefined
  /** The body's `Content-Encoding`, when it has one (decoded before the comparison: traffic/shadow-content.ts). */
  readonly contentEncoding?: string | undefined
  readonly body: Buffer
}

/** A status difference (SPEC 15). */
export const STATUS_POINTER = '#status'
/** The whole body: JSON against non-JSON, or two non-JSON bodies that differ in a byte. */
export const WHOLE_BODY_POINTER = ''

/** Always left out of a comparison (SPEC 15): values each side makes up for itself. */
export const ALWAYS_IGNORED: readonly string[] = Object.freeze(['/meta/requestId', '/meta/timingMs', '/meta/sessionId', '/meta/executionId', '/meta/lineageId'])

/** A segment that may be recorded as written: 1-64 characters of `[A-Za-z0-9_-]` (SPEC 15). */
const PLAIN_SEGMENT = /^[A-Za-z0-9_-]{1,64}$/
/** `application/json`, or any `type/subtype+json`, parameters aside. */
const JSON_MEDIA_TYPE = /^\s*(?:application\/json|[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]*\+json)\s*(?:;|$)/i
/** RFC 8259 8.1: UTF-8; bytes that are not are not JSON here either. */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** Whether a member name is a credential (SPEC 5), so that its pointer segment is hashed. */
export type CredentialTest = (name: string) => boolean
const NO_CREDENTIAL: CredentialTest = () => false

/** Ignore pointers compiled once per settings: each a list of tokens, `*` standing for any one. */
export type IgnoreList = readonly (readonly string[])[]

/** `ignore` of the shadow settings plus the always-ignored pointers, as token lists (RFC 6901 escapes undone). */
export function compileIgnoreList(pointers: readonly string[]): IgnoreList {
  const unique = new Set([...ALWAYS_IGNORED, ...pointers])
  return Object.freeze([...unique].map((pointer) => Object.freeze(pointer === '' ? [] : pointer.slice(1).split('/').map(decodeToken))))
}

/** True when `contentType` says JSON: `application/json` or `*+json` (SPEC 15). */
export function isJsonMediaType(contentType: string | undefined): boolean {
  return contentType !== undefined && JSON_MEDIA_TYPE.test(contentType)
}

/**
 * The recorded pointers where two answers differ, in the order found, each once; empty when
 * they match. A status difference is `#status`; JSON bodies are compared after the ignored
 * subtrees are removed from both, key order aside and arrays in order; other bodies byte for
 * byte, and JSON against non-JSON, as `""`.
 */
export function compareAnswers(primary: ComparedAnswer, candidate: ComparedAnswer, ignore: IgnoreList, isCredential: CredentialTest = NO_CREDENTIAL): string[] {
  const found = new Set<string>()
  if (primary.statusCode !== candidate.statusCode) found.add(STATUS_POINTER)
  try {
    compareBodies(primary, candidate, ignore, isCredential, found)
  } catch (error) {
    // A document nested deeper than these walks can go (JSON.parse reads deeper than a recursion
    // does) is compared by its bytes, as one that is not JSON is, rather than lost with the comparison.
    if (!(error instanceof RangeError)) throw error
    found.clear()
    if (primary.statusCode !== candidate.statusCode) found.add(STATUS_POINTER)
    if (!primary.body.equals(candidate.body)) found.add(WHOLE_BODY_POINTER)
  }
  return [...found]
}

/** Adds the pointers where two bodies differ: as JSON, or WHOLE_BODY_POINTER when either is not JSON. */
function compareBodies(primary: ComparedAnswer, candidate: ComparedAnswer, ignore: IgnoreList, isCredential: CredentialTest, found: Set<string>): void {
  const leftText = jsonText(primary)
  const rightText = jsonText(candidate)
  // Numbers JSON.parse would change (a 20-digit id, 1e400) compare by their exact values, on both sides.
  const exact = leftText !== NOT_JSON && rightText !== NOT_JSON && (firstLossyNumber(leftText) !== undefined || firstLossyNumber(rightText) !== undefined)
  const left = readJson(leftText, exact)
  const right = readJson(rightText, exact)
  if (left === NOT_JSON || right === NOT_JSON) {
    if (left !== right || !primary.body.equals(candidate.body)) found.add(WHOLE_BODY_POINTER)
    return
  }
  for (const pattern of ignore) {
    removeMatching(left, pattern)
    removeMatching(right, pattern)
  }
  // Elements are taken out of their arrays once every pattern has been applied, so that each
  // pattern's indexes are those of the answer as it came (`/items/0` and `/items/1` name the first two).
  dropRemoved(left.value)
  dropRemoved(right.value)
  // An ignored root ("" in ignore) leaves nothing to compare.
  if (left.value !== IGNORED && right.value !== IGNORED) diff(left.value, right.value, '', found, isCredential)
}

const NOT_JSON = Symbol('not JSON')
/** What an ignored root becomes. */
const IGNORED = Symbol('ignored')
/** What an ignored array element becomes until dropRemoved takes it out. */
const REMOVED = Symbol('removed')

/** A parsed document in a box, so that removing the root is one more case of removing a member. */
interface Box {
  value: unknown
}

/** The body's text when it says JSON and is UTF-8. */
function jsonText(answer: ComparedAnswer): string | typeof NOT_JSON {
  if (!isJsonMediaType(answer.contentType)) return NOT_JSON
  try {
    return UTF8.decode(answer.body)
  } catch {
    return NOT_JSON
  }
}

function readJson(text: string | typeof NOT_JSON, exact: boolean): Box | typeof NOT_JSON {
  if (text === NOT_JSON) return NOT_JSON
  try {
    // Parsed as it came first: exactNumbers' rewrite would also make some texts that are not JSON parse.
    const value = JSON.parse(text) as unknown
    return { value: exact ? (JSON.parse(exactNumbers(text)) as unknown) : value }
  } catch {
    return NOT_JSON
  }
}

/**
 * Removes every subtree `pattern` names: `*` is any one member or element. An element is marked
 * and taken out of its array later (dropRemoved), so that the same patterns on both sides leave
 * arrays that still line up.
 */
function removeMatching(box: Box, pattern: readonly string[]): void {
  if (pattern.length === 0) box.value = IGNORED
  else removeBelow(box.value, pattern, 0)
}

function removeBelow(node: unknown, pattern: readonly string[], index: number): void {
  if (node === null || typeof node !== 'object') return
  const token = pattern[index] as string
  const last = index === pattern.length - 1
  if (Array.isArray(node)) {
    const positions = token === '*' ? node.map((_item, position) => position) : arrayIndex(token, node.length)
    for (const position of positions) {
      if (last) node[position] = REMOVED
      else removeBelow(node[position], pattern, index + 1)
    }
    return
  }
  const object = node as Record<string, unknown>
  const keys = token === '*' ? Object.keys(object) : Object.hasOwn(object, token) ? [token] : []
  for (const key of keys) {
    if (last) delete object[key]
    else removeBelow(object[key], pattern, index + 1)
  }
}

/** Takes the elements removeBelow marked out of every array under `node`. */
function dropRemoved(node: unknown): void {
  if (node === null || typeof node !== 'object') return
  if (Array.isArray(node)) {
    let kept = 0
    for (const item of node as unknown[]) {
      if (item === REMOVED) continue
      dropRemoved(item)
      node[kept++] = item
    }
    node.length = kept
    return
  }
  for (const key in node) dropRemoved((node as Record<string, unknown>)[key])
}

/** RFC 6901 4: an array index is `0` or digits without a leading zero. */
function arrayIndex(token: string, length: number): number[] {
  if (!/^(?:0|[1-9][0-9]*)$/.test(token)) return []
  const position = Number(token)
  return position < length ? [position] : []
}

/** Adds the recorded pointer of every place where `a` and `b` differ. */
function diff(a: unknown, b: unknown, pointer: string, found: Set<string>, isCredential: CredentialTest): void {
  if (a === b) return
  const aArray = Array.isArray(a)
  const bArray = Array.isArray(b)
  if (aArray && bArray) {
    const common = Math.min(a.length, b.length)
    for (let position = 0; position < common; position++) diff(a[position], b[position], `${pointer}/*`, found, isCredential)
    // Elements only one side has: the array's elements, recorded once as `/*`.
    if (a.length !== b.length) found.add(`${pointer}/*`)
    return
  }
  if (isObject(a) && isObject(b) && !aArray && !bArray) {
    for (const key of Object.keys(a)) {
      const child = `${pointer}/${recordedSegment(key, isCredential)}`
      if (!Object.hasOwn(b, key)) found.add(child)
      else diff(a[key], b[key], child, found, isCredential)
    }
    for (const key of Object.keys(b)) if (!Object.hasOwn(a, key)) found.add(`${pointer}/${recordedSegment(key, isCredential)}`)
    return
  }
  // Two scalars, or two kinds of value: numbers compare as JSON reads them (1.0 is 1), or by exact value (exactNumbers).
  found.add(pointer)
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object'
}

/**
 * A member name as a recorded pointer may hold it (SPEC 15 "No content kept"): as written when
 * it is 1-64 characters of `[A-Za-z0-9_-]`, else `~h` and the first 8 hex digits of its SHA-256,
 * since a key can carry data (an e-mail address, a token used as a map key). `~h` is no RFC 6901
 * escape, so it never reads as a real name. Array indexes are `*` (diff above). A name that
 * `isCredential` says is one (a service key, the request's own token, used as a map key) is
 * hashed too, plain or not: SPEC 15 keeps no credential.
 */
export function recordedSegment(name: string, isCredential: CredentialTest = NO_CREDENTIAL): string {
  if (PLAIN_SEGMENT.test(name) && !isCredential(name)) return name
  return `~h${createHash('sha256').update(wellFormed(name), 'utf8').digest('hex').slice(0, 8)}`
}

/** A lone surrogate hashed as its escape, so that two different names never hash as one U+FFFD. */
function wellFormed(text: string): string {
  return text.isWellFormed() ? text : JSON.stringify(text)
}

function decodeToken(token: string): string {
  return token.replaceAll('~1', '/').replaceAll('~0', '~')
}
