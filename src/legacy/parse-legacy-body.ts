import { z } from 'zod'
import type { LegacyAction, LegacyFields } from '../config/schema.js'
import { GatewayError, type ErrorDetail } from '../errors/registry.js'
import { encodeToken, getAtPointer, pointerTokens } from '../util/json-pointer.js'
import { isPlainObject } from '../util/is-plain-object.js'
import { firstLossyNumberMatch } from '../util/json-numbers.js'

/** A legacy call's fields, read through the tenant's `legacy.fields` pointers (SPEC 4). */
export interface LegacyCall {
  input: unknown
  policy?: string
  route?: string
  risk?: string
  state?: { policy?: string; route?: string; risk?: string }
  stateId?: string
  /** Top-level body members the gateway does not consume; carried into the V4 execution body. */
  unknown: Record<string, unknown>
}

const optionalString = z.string().optional()

const executeFieldsSchema = z.object({
  input: z.custom<unknown>((value) => value !== undefined, 'is required'),
  policy: optionalString,
  route: optionalString,
  risk: optionalString
})

const sessionExecuteFieldsSchema = executeFieldsSchema.extend({
  state: z.strictObject({ policy: optionalString, route: optionalString, risk: optionalString }).optional(),
  stateId: z.string().min(1).max(256).optional()
})

const EXECUTE_FIELDS = ['input', 'policy', 'route', 'risk'] as const
const SESSION_EXECUTE_FIELDS = [...EXECUTE_FIELDS, 'state', 'stateId'] as const

/** The media type of a content-type, lower-cased (RFC 9110 8.3.1: case-insensitive), without parameters. */
function mediaType(contentType: string): string {
  return (contentType.split(';', 1)[0] as string).trim().toLowerCase()
}

/**
 * A legacy request body's content type: `application/json` with any parameters. SPEC 4 answers
 * anything else 415, structured `+json` types included.
 */
export function isLegacyBodyContentType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false
  return contentType === 'application/json' || mediaType(contentType) === 'application/json'
}

/** An answer's content type that says JSON: `application/json` or a structured `application/*+json` (RFC 6839). */
export function isJsonContentType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false
  if (contentType === 'application/json') return true
  const type = mediaType(contentType)
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}

// RFC 8259 8.1: JSON is UTF-8 without a byte-order mark; invalid bytes are refused rather than replaced,
// which would change the input. (ignoreBOM keeps a BOM in the text, where JSON.parse refuses it.)
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * Fields the gateway does not consume are carried "unchanged" (SPEC 4), but JSON.parse turns
 * 1e999 into Infinity (then null), 1e-999 into 0 and rounds a 30-digit integer: a body with
 * such a number is refused with a clear 400 rather than altered on the way, naming where the
 * number is by JSON pointer as every other 400 does (`/policy`, or the pointer a tenant's
 * `legacy.fields` reads it at). The scan runs only when a cheap hint says such a number may be there.
 */
function assertNumbersSurviveParsing(text: string): void {
  const found = firstLossyNumberMatch(text)
  if (found === undefined) return
  const { token, offset } = found
  const pointer = pointerAtOffset(text, offset)
  const shown = pointer === '' ? 'the body' : pointer
  throw new GatewayError('INVALID_REQUEST', `request body has a number at ${shown} that JSON cannot carry unchanged (out of range or too precise); send it as a string`, {
    details: [{ pointer, message: `number out of range or too precise: ${token.slice(0, 24)}${token.length > 24 ? '…' : ''}` }]
  })
}

/**
 * The JSON pointer of the value that starts at `offset` in a JSON text JSON.parse accepted:
 * the member names and array indexes of the containers open there. Walked only on the way to a
 * refusal, so it favours plainness over speed.
 */
export function pointerAtOffset(text: string, offset: number): string {
  const path: (string | number)[] = []
  const inArray: boolean[] = []
  // In an object, whether the next string is a member name (after `{` or `,`) or a value.
  let nameNext = false
  let index = 0
  while (index < offset) {
    const char = text[index]
    if (char === '{' || char === '[') {
      inArray.push(char === '[')
      path.push(char === '[' ? 0 : '')
      nameNext = char === '{'
    } else if (char === '}' || char === ']') {
      inArray.pop()
      path.pop()
      nameNext = false
    } else if (char === ',') {
      if (inArray.at(-1) === true) path[path.length - 1] = (path.at(-1) as number) + 1
      else nameNext = true
    } else if (char === '"') {
      const end = endOfString(text, index)
      if (nameNext) {
        path[path.length - 1] = JSON.parse(text.slice(index, end + 1)) as string
        nameNext = false
      }
      index = end
    }
    index++
  }
  return path.map((token) => `/${encodeToken(String(token))}`).join('')
}

/** The index of the quote that closes the JSON string opening at `start`. */
function endOfString(text: string, start: number): number {
  let index = start + 1
  while (index < text.length && text[index] !== '"') index += text[index] === '\\' ? 2 : 1
  return index
}

/** A legacy body as a JSON object (a clear 400 otherwise), with the text it was parsed from. */
export function parseJsonObjectText(bytes: Buffer): { object: Record<string, unknown>; text: string } {
  let document: unknown
  let text: string
  try {
    text = utf8.decode(bytes)
    document = JSON.parse(text)
  } catch {
    throw new GatewayError('INVALID_REQUEST', 'request body is not valid JSON', { details: [{ pointer: '', message: 'not valid UTF-8 JSON' }] })
  }
  assertNumbersSurviveParsing(text)
  if (document === null || typeof document !== 'object' || Array.isArray(document)) {
    throw new GatewayError('INVALID_REQUEST', 'request body must be a JSON object', { details: [{ pointer: '', message: 'expected a JSON object' }] })
  }
  return { object: document as Record<string, unknown>, text }
}

/**
 * Validates a legacy body and reads its fields. `state` and `stateId` are consumed on
 * session-execute routes only; on execute routes they are ordinary unknown fields.
 * `extraConsumedPointer` is a `body:` state key, which the gateway consumes too.
 */
export function parseLegacyCall(
  body: Record<string, unknown>,
  action: Exclude<LegacyAction, 'proxy'>,
  fields: LegacyFields,
  unknownFields: 'keep' | 'drop',
  extraConsumedPointer?: string
): LegacyCall {
  // One object literal per action rather than a loop over the names: the same shape every time.
  const raw: Record<string, unknown> =
    action === 'execute'
      ? { input: getAtPointer(body, fields.input), policy: getAtPointer(body, fields.policy), route: getAtPointer(body, fields.route), risk: getAtPointer(body, fields.risk) }
      : {
          input: getAtPointer(body, fields.input),
          policy: getAtPointer(body, fields.policy),
          route: getAtPointer(body, fields.route),
          risk: getAtPointer(body, fields.risk),
          state: stateWithoutConsumed(getAtPointer(body, fields.state), fields, extraConsumedPointer),
          stateId: getAtPointer(body, fields.stateId)
        }
  const call = validateWithSchema(raw, action, fields)
  call.unknown = {}
  if (unknownFields === 'keep') {
    const consumed = consumedMembers(fields, action, extraConsumedPointer)
    const keys = consumed.all ? [] : Object.keys(body)
    for (let index = 0; index < keys.length; index++) {
      const key = keys[index] as string
      if (consumed.whole.has(key)) continue
      const inner = consumed.inner.get(key)
      const value = inner === undefined ? body[key] : withoutPaths(body[key], inner)
      if (value === EMPTIED) continue
      if (V4_BODY_NAMES.has(key)) throw clashingMember(key)
      defineMember(call.unknown, key, value)
    }
  }
  return call
}

/**
 * Names the V4 bodies give a meaning of their own. A field map that reads the legacy fields
 * elsewhere leaves a member of one of these names to be carried, where it would either be
 * overwritten by the gateway's field (dropped silently) or become a per-call `route` or `risk`
 * the client never meant (SPEC 4): refused instead.
 */
const V4_BODY_NAMES: ReadonlySet<string> = new Set(['input', 'policy', 'route', 'risk'])

function clashingMember(key: string): GatewayError {
  const message = `"${key}" is not read as the ${key} field on this tenant (legacy.fields points elsewhere), and carried on it would clash with the V4 field of that name`
  return new GatewayError('INVALID_REQUEST', `invalid legacy request body: /${key} ${message}`, { details: [{ pointer: `/${key}`, message }] })
}

// defineProperty: a member named "__proto__" stays a member, as JSON.parse made it.
function defineMember(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })
}

/**
 * What a tenant's field map (and a route's `body:` state key) consumes of a body, worked out once
 * per config, action and state key. A pointer of one token takes its member whole; a deeper one
 * (`/payload/data`) takes only that part, and the rest of the member is carried like any unknown
 * field (SPEC 4: nothing is dropped silently).
 */
interface ConsumedMembers {
  /** A pointer of no tokens (`""`) takes the whole body: nothing is left to carry. */
  all: boolean
  whole: ReadonlySet<string | undefined>
  /** Per top-level member, the token paths inside it that are consumed. */
  inner: ReadonlyMap<string, readonly (readonly string[])[]>
}

type RuntimeAction = Exclude<LegacyAction, 'proxy'>

/** Per field map, per action, per state-key pointer ("" for none): all come from the config. */
const consumedByFields = new WeakMap<LegacyFields, Record<RuntimeAction, Map<string, ConsumedMembers>>>()

function consumedMembers(fields: LegacyFields, action: RuntimeAction, statePointer = ''): ConsumedMembers {
  let byAction = consumedByFields.get(fields)
  if (byAction === undefined) {
    byAction = { execute: new Map(), 'session-execute': new Map() }
    consumedByFields.set(fields, byAction)
  }
  let consumed = byAction[action].get(statePointer)
  if (consumed === undefined) {
    const pointers = (action === 'execute' ? EXECUTE_FIELDS : SESSION_EXECUTE_FIELDS).map((name) => fields[name])
    consumed = consumedBy(statePointer === '' ? pointers : [...pointers, statePointer])
    byAction[action].set(statePointer, consumed)
  }
  return consumed
}

function consumedBy(pointers: readonly string[]): ConsumedMembers {
  const tokenLists = pointers.map(pointerTokens)
  const whole = new Set(tokenLists.filter((tokens) => tokens.length <= 1).map((tokens) => tokens[0]))
  const inner = new Map<string, (readonly string[])[]>()
  for (const [head, ...rest] of tokenLists) {
    if (head === undefined || rest.length === 0 || whole.has(head)) continue
    inner.set(head, [...(inner.get(head) ?? []), rest])
  }
  return { all: tokenLists.some((tokens) => tokens.length === 0), whole, inner }
}

/** Per field map and `body:` state key ("" for none): the paths inside `state` that other fields read. */
const insideStateByFields = new WeakMap<LegacyFields, Map<string, readonly (readonly string[])[]>>()

/**
 * `state` without what another field, or the route's `body:` state key, reads from inside it
 * (`legacy.fields.stateId: /state/id`): those members are that field's, and `state` is checked
 * as SPEC 4's `{ policy, route, risk }`, which refuses any other member.
 */
function stateWithoutConsumed(state: unknown, fields: LegacyFields, statePointer = ''): unknown {
  let byPointer = insideStateByFields.get(fields)
  if (byPointer === undefined) insideStateByFields.set(fields, (byPointer = new Map()))
  let inside = byPointer.get(statePointer)
  if (inside === undefined) {
    const stateTokens = pointerTokens(fields.state)
    const others = EXECUTE_FIELDS.map((name) => fields[name]).concat(fields.stateId, statePointer === '' ? [] : [statePointer])
    inside = others
      .map(pointerTokens)
      .filter((tokens) => tokens.length > stateTokens.length && stateTokens.every((token, index) => tokens[index] === token))
      .map((tokens) => tokens.slice(stateTokens.length))
    byPointer.set(statePointer, inside)
  }
  if (inside.length === 0) return state
  const rest = withoutPaths(state, inside)
  // It held only what the other fields read: no defaults of its own.
  return rest === EMPTIED ? {} : rest
}

/** What `withoutPaths` gives for an object that held only what the field map consumed. */
const EMPTIED = Symbol('emptied')

/**
 * `value` without the members at `paths`; the objects on the way are copied, never changed,
 * and `value` itself comes back when none of the paths is there. An array on the way is kept
 * whole (taking out an element would shift the rest). EMPTIED when the consumed members were
 * all an object held: there is nothing left to carry. An object that was empty already stays.
 */
function withoutPaths(value: unknown, paths: readonly (readonly string[])[]): unknown {
  if (!isPlainObject(value)) return value
  let copy: Record<string, unknown> | undefined
  for (const [head, ...rest] of paths) {
    const current = copy ?? value
    if (head === undefined || !Object.hasOwn(current, head)) continue
    const child = current[head]
    const trimmed = rest.length === 0 ? EMPTIED : withoutPaths(child, [rest])
    if (trimmed === child) continue
    if (copy === undefined) {
      copy = {}
      for (const key of Object.keys(value)) defineMember(copy, key, value[key])
    }
    if (trimmed === EMPTIED) delete copy[head]
    else defineMember(copy, head, trimmed)
  }
  if (copy === undefined) return value
  return Object.keys(copy).length === 0 ? EMPTIED : copy
}

/** zod's verdict on the fields, with each refusal at the JSON pointer the tenant's field map reads it from. */
function validateWithSchema(raw: Record<string, unknown>, action: Exclude<LegacyAction, 'proxy'>, fields: LegacyFields): LegacyCall {
  const schema = action === 'execute' ? executeFieldsSchema : sessionExecuteFieldsSchema
  const result = schema.safeParse(raw)
  if (!result.success) {
    const details: ErrorDetail[] = result.error.issues.flatMap((issue) => {
      const [field, ...rest] = issue.path
      const base = fields[field as keyof LegacyFields] ?? ''
      const pointer = base + rest.map((token) => `/${encodeToken(String(token))}`).join('')
      // zod names unknown keys on their object: SPEC 4 names each offending field by its own pointer.
      if (issue.code === 'unrecognized_keys') return issue.keys.map((key) => ({ pointer: `${pointer}/${encodeToken(key)}`, message: 'unknown field' }))
      return [{ pointer, message: issue.message }]
    })
    throw new GatewayError('INVALID_REQUEST', `invalid legacy request body: ${details.map((detail) => `${detail.pointer} ${detail.message}`).join('; ')}`, { details })
  }
  return result.data as LegacyCall
}
