import type { CredentialsConfig, LegacyAction, LegacyFields } from '../config/schema.js'
import { extractCredential, resolveRuntimeAuthorization, type PresentedCredential } from '../credentials/index.js'
import { GatewayError } from '../errors/registry.js'
import { parsedMemberCount, readJsonTextMembers } from '../util/json-members.js'
import { isLegacyBodyContentType, parseJsonObjectText, parseLegacyCall, type LegacyCall } from './parse-legacy-body.js'
import type { CompiledRoute } from './route-table.js'

/**
 * The configured credential headers of a request with every value each was sent with, as
 * Node's `headersDistinct` would give them, read from the raw headers without building the
 * whole map.
 */
export function credentialHeaders(rawHeaders: readonly string[], sources: readonly string[]): Record<string, string[] | undefined> {
  const found: Record<string, string[] | undefined> = {}
  for (let index = 0; index < rawHeaders.length; index += 2) {
    const name = rawHeaders[index] as string
    // Indexed: `sources` is the frozen config's, and for-of over a frozen array is several times slower.
    for (let at = 0; at < sources.length; at++) {
      const source = sources[at] as string
      if (name.length === source.length && name.toLowerCase() === source) {
        const values = (found[source] ??= [])
        values.push(rawHeaders[index + 1] as string)
        // A source listed twice in the config still reads each header once.
        break
      }
    }
  }
  return found
}

/** The credential a legacy request presents (SPEC 5), read from headers and the query. */
export function readLegacyCredential(
  headersDistinct: Record<string, string[] | undefined>,
  rawQuery: string,
  credentials: CredentialsConfig
): PresentedCredential | null {
  const query = credentials.queryParam !== null && rawQuery !== '' ? new URLSearchParams(rawQuery) : null
  return extractCredential(headersDistinct, query, credentials)
}

/**
 * Checks made before a runtime legacy body is read: a usable session token (answered without
 * any upstream call, SPEC 5) and a JSON content type, not content-coded. Returns the
 * `Authorization` to send.
 */
export function authorizeRuntimeCall(credential: PresentedCredential | null, contentType: string | undefined, contentEncoding: string | undefined): string {
  const authorization = resolveRuntimeAuthorization(credential)
  if (!isLegacyBodyContentType(contentType)) throw new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'legacy request bodies must be application/json')
  // RFC 9110 15.5.16: a content coding the server does not take is a 415. The gateway reads the
  // body as JSON and would otherwise call gzip bytes "not valid JSON".
  if (contentEncoding !== undefined && !/^\s*(?:identity)?\s*$/i.test(contentEncoding)) {
    throw new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'legacy request bodies must not be content-coded (gzip, br, …): send plain JSON')
  }
  return authorization
}

/** The tenant's reading of legacy bodies (SPEC 4: `legacy.fields`, `legacy.unknownFields`). */
export interface BodyProfile {
  readonly fields: LegacyFields
  readonly unknownFields: 'keep' | 'drop'
}

/** A runtime legacy body, parsed and validated. */
export interface RuntimeBody {
  body: Record<string, unknown>
  call: LegacyCall
  /** The body's text, when it is already the V4 execution body (`asV4ExecuteBody`). */
  asSent: string | undefined
}

/** Parses and validates a runtime legacy body through the tenant's field map (SPEC 4). */
export function parseRuntimeBody(bytes: Buffer, tenant: BodyProfile, route: CompiledRoute): RuntimeBody {
  const { object: body, text } = parseJsonObjectText(bytes)
  const bodyStatePointer = route.stateKey?.startsWith('body:') === true ? route.stateKey.slice('body:'.length) : undefined
  // The default `body:/stateId` is read where `legacy.fields.stateId` points (readStateKey), which
  // the field map consumes already: a member the client calls `stateId` is then an unknown field.
  const consumedStatePointer = bodyStatePointer === '/stateId' ? undefined : bodyStatePointer
  const action = route.action as Exclude<LegacyAction, 'proxy'>
  const call = parseLegacyCall(body, action, tenant.fields, tenant.unknownFields, consumedStatePointer)
  return { body, call, asSent: asV4ExecuteBody(text, body, tenant, route) }
}

/** Nesting past this goes through JSON.stringify, which refuses what it cannot serialise (to-json-body.ts). */
const MAX_DEPTH_SENT_AS_IS = 256

/**
 * SPEC 4's `execute` body is `{ input, policy?, route?, risk? }` and the unknown members. Where the
 * field map reads each field at its own name and unknown members are kept, that is every member
 * of the legacy body, unchanged: its text goes on as sent, with no serialisation per request
 * (docs/performance.md), when it says what the serialised translation would say to any reader:
 * - no name repeats, at any depth (JSON.parse kept one value of it; RFC 8259 4: readers differ);
 * - its numbers are written as JSON.stringify writes them (no `1.0`, `1e2`, `-0`, no integer of
 *   22 digits, which it writes `1e+21`), so a reader that types them strictly reads the same;
 *   lossy ones were refused already (parse-legacy-body.ts);
 * - no other top-level name could be read as one of the fields the gateway checked by a reader
 *   that matches names without case (`Policy`, `riſk`, `İnput`): the translation writes those
 *   fields last;
 * - it nests at most `MAX_DEPTH_SENT_AS_IS` deep.
 * What is left to differ is spacing, member order (which a JSON object does not have: RFC 8259 4)
 * and how strings are escaped.
 */
function asV4ExecuteBody(text: string, body: Record<string, unknown>, tenant: BodyProfile, route: CompiledRoute): string | undefined {
  if (route.action !== 'execute' || tenant.unknownFields !== 'keep' || route.stateKey !== undefined) return undefined
  const fields = tenant.fields
  if (fields.input !== '/input' || fields.policy !== '/policy' || fields.route !== '/route' || fields.risk !== '/risk') return undefined
  const members = readJsonTextMembers(text, MAX_DEPTH_SENT_AS_IS)
  // As many names written as JSON.parse kept: none repeats, anywhere.
  if (members === undefined || members.all !== parsedMemberCount(body)) return undefined
  const names = members.topLevelNames
  for (let index = 0; index < names.length; index++) if (mayReadAsCheckedField(names[index] as string)) return undefined
  return text
}

const CHECKED_FIELDS: ReadonlySet<string> = new Set(['input', 'policy', 'route', 'risk'])

/**
 * A top-level name, as written, that a reader matching names without case (Go's encoding/json,
 * .NET's web defaults, Java's equalsIgnoreCase) could take for a checked field: `Policy`, `riſk`
 * (ſ folds to s), any name written with an escape (not decoded here), and any name as long as a
 * checked field with a letter outside ASCII (`İnput`: folded one letter at a time, as Java does,
 * it reads `input`; JavaScript folds whole strings otherwise).
 */
function mayReadAsCheckedField(name: string): boolean {
  if (CHECKED_FIELDS.has(name)) return false
  if (name.length >= 4 && name.length <= 6 && NOT_ASCII.test(name)) return true
  return name.includes('\\') || CHECKED_FIELDS.has(name.toUpperCase().toLowerCase())
}

// Written names hold no control character (JSON escapes them), so this is "outside ASCII".
const NOT_ASCII = /[^\x20-\x7e]/
