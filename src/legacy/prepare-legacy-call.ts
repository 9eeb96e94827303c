import type { CredentialsConfig, LegacyAction, LegacyFields } from '../config/schema.js'
import { extractCredential, resolveRuntimeAuthorization, type PresentedCredential } from '../credentials/index.js'
import { GatewayError } from '../errors/registry.js'
import { isLegacyBodyContentType, parseJsonObject, parseLegacyCall, type LegacyCall } from './parse-legacy-body.js'
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

/** Parses and validates a runtime legacy body through the tenant's field map (SPEC 4). */
export function parseRuntimeBody(bytes: Buffer, tenant: BodyProfile, route: CompiledRoute): { body: Record<string, unknown>; call: LegacyCall } {
  const body = parseJsonObject(bytes)
  const bodyStatePointer = route.stateKey?.startsWith('body:') === true ? route.stateKey.slice('body:'.length) : undefined
  // The default `body:/stateId` is read where `legacy.fields.stateId` points (readStateKey), which
  // the field map consumes already: a member the client calls `stateId` is then an unknown field.
  const consumedStatePointer = bodyStatePointer === '/stateId' ? undefined : bodyStatePointer
  const action = route.action as Exclude<LegacyAction, 'proxy'>
  return { body, call: parseLegacyCall(body, action, tenant.fields, tenant.unknownFields, consumedStatePointer) }
}
