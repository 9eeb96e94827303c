import type { CredentialSource, CredentialsConfig } from '../config/schema.js'
import { GatewayError } from '../errors/registry.js'
import type { ErrorDetail } from '../errors/registry.js'
import { classifyCredential } from './classify-credential.js'
import type { CredentialKind } from './classify-credential.js'

export type CredentialOrigin = CredentialSource | 'query'

export interface PresentedCredential {
  /** The credential itself, scheme stripped. */
  value: string
  kind: CredentialKind
  /** Every source it was presented in, in config order, each named once. */
  origins: CredentialOrigin[]
}

/** SPEC 5: anything longer is refused as AUTH_INVALID. */
export const MAX_CREDENTIAL_BYTES = 4096

/** One value as found in one place, before any check. */
interface Presentation {
  origin: CredentialOrigin
  /** Names the place in error details (`header:x-api-key`, `query:token`); never the value. */
  pointer: string
  value: string
  /** Why the raw form cannot carry a credential, or null; reported only after the conflict check. */
  malformed: string | null
}

// RFC 9110 11.4: credentials = auth-scheme 1*SP token68; legacy clients also send tabs.
const SUPPORTED_SCHEME = /^(?:bearer|token)[ \t]+/i
const SCHEME_ONLY = /^(?:bearer|token)$/i
const NO_TOKEN = 'has a scheme but no token'
const HAS_WHITESPACE = /[ \t]/
// SPEC 5 forbids whitespace and control characters; visible ASCII is the safe superset of that rule.
const VISIBLE_ASCII = /^[\x21-\x7e]*$/

/**
 * Reads every configured source, in `config.sources` order, then the query parameter.
 * `headers` has the shape of Node's `req.headersDistinct`, so repeated headers are visible.
 * Returns null when nothing is presented; throws CREDENTIALS_CONFLICT or AUTH_INVALID (SPEC 5).
 */
export function extractCredential(
  headers: Record<string, string[] | undefined>,
  query: URLSearchParams | null,
  config: CredentialsConfig
): PresentedCredential | null {
  const presentations = collectPresentations(headers, query, config)
  const first = presentations[0]
  if (first === undefined) return null
  // SPEC 5: a conflict is reported before any other check, so it wins over a malformed value.
  // One presentation, the common case, cannot conflict.
  if (presentations.length > 1) assertNoConflict(first, presentations)
  for (const presentation of presentations) assertUsable(presentation)
  return { value: first.value, kind: classifyCredential(first.value, config), origins: presentations.length === 1 ? [first.origin] : uniqueOrigins(presentations) }
}

/**
 * The first token presented, scheme stripped, without any other check: SPEC 12's client id is
 * taken from it even when two sources conflict or the value is malformed ("the first source with
 * a value"). An empty value, or a scheme with no token (`Authorization: Bearer `), presents none:
 * the id comes from the next source, or is `anonymous`, never the hash of nothing.
 */
export function firstPresentedToken(
  headers: Record<string, string[] | undefined>,
  query: URLSearchParams | null,
  config: CredentialsConfig
): { value: string; origin: CredentialOrigin } | undefined {
  for (const presentation of collectPresentations(headers, query, config)) {
    if (presentation.value !== '' && presentation.malformed !== NO_TOKEN) return { value: presentation.value, origin: presentation.origin }
  }
  return undefined
}

/** SPEC 5's four credential headers, whatever `credentials.sources` reads. */
export const EVERY_CREDENTIAL_SOURCE: readonly CredentialSource[] = ['authorization', 'x-session-token', 'x-api-key', 'x-service-api-key']

/**
 * Every token presented in any of SPEC 5's headers (configured as a source or not) and the query
 * parameter, schemes stripped: what a request could have handed a legacy upstream (SPEC 14 passes
 * credentials on as sent), so what an answer echoing one must not have kept (SPEC 15).
 */
export function everyPresentedToken(headers: Record<string, string[] | undefined>, query: URLSearchParams | null, config: CredentialsConfig): Set<string> {
  const tokens = new Set<string>()
  for (const presentation of collectPresentations(headers, query, { ...config, sources: [...EVERY_CREDENTIAL_SOURCE] })) {
    if (presentation.value !== '' && presentation.malformed !== NO_TOKEN) tokens.add(presentation.value)
  }
  return tokens
}

function collectPresentations(
  headers: Record<string, string[] | undefined>,
  query: URLSearchParams | null,
  config: CredentialsConfig
): Presentation[] {
  const presentations: Presentation[] = []
  const sources = config.sources
  // Indexed: the config is frozen, and for-of over a frozen array is several times slower.
  for (let index = 0; index < sources.length; index++) {
    const source = sources[index] as (typeof sources)[number]
    const values = headers[source]
    if (values === undefined) continue
    for (const raw of values) {
      const parsed = source === 'authorization' ? parseAuthorization(raw) : { value: raw, malformed: null }
      presentations.push({ origin: source, pointer: `header:${source}`, value: parsed.value, malformed: parsed.malformed })
    }
  }
  if (config.queryParam !== null && query !== null) {
    for (const value of query.getAll(config.queryParam)) {
      presentations.push({ origin: 'query', pointer: `query:${config.queryParam}`, value, malformed: null })
    }
  }
  return presentations
}

/**
 * `Bearer x` and `Token x` (scheme case-insensitive) give x; a bare value gives itself. The
 * candidate value is kept even when malformed so that the conflict check can still compare it.
 */
function parseAuthorization(raw: string): { value: string; malformed: string | null } {
  const scheme = SUPPORTED_SCHEME.exec(raw)
  if (scheme !== null) return { value: raw.slice(scheme[0].length), malformed: null }
  if (SCHEME_ONLY.test(raw)) return { value: raw, malformed: NO_TOKEN }
  if (HAS_WHITESPACE.test(raw)) return { value: raw, malformed: 'expected Bearer <token>, Token <token> or a bare token' }
  return { value: raw, malformed: null }
}

function assertNoConflict(first: Presentation, presentations: Presentation[]): void {
  const details: ErrorDetail[] = presentations
    .filter((presentation) => presentation.value !== first.value)
    .map((presentation) => ({
      pointer: presentation.pointer,
      message: presentation.pointer === first.pointer
        ? 'presented twice with different values'
        : `differs from the credential in ${first.pointer}`
    }))
  if (details.length === 0) return
  throw new GatewayError('CREDENTIALS_CONFLICT', 'two different credentials were presented; send exactly one', { details })
}

function assertUsable(presentation: Presentation): void {
  const problem = presentation.malformed ?? valueProblem(presentation.value)
  if (problem === null) return
  throw new GatewayError('AUTH_INVALID', `the credential in ${presentation.pointer} ${problem}`, {
    details: [{ pointer: presentation.pointer, message: problem }]
  })
}

function valueProblem(value: string): string | null {
  if (value === '') return 'is empty'
  if (Buffer.byteLength(value, 'utf8') > MAX_CREDENTIAL_BYTES) return `is longer than ${MAX_CREDENTIAL_BYTES} bytes`
  if (!VISIBLE_ASCII.test(value)) return 'contains whitespace, control or non-ASCII characters'
  return null
}

function uniqueOrigins(presentations: Presentation[]): CredentialOrigin[] {
  return [...new Set(presentations.map((presentation) => presentation.origin))]
}
