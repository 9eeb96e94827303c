import { credentialSourceSchema } from '../config/schema.js'
import { GatewayError } from '../errors/registry.js'
import type { PresentedCredential } from './extract-credential.js'

type ForwardedHeaders = Record<string, string | string[] | undefined>

/**
 * Every header a legacy client may carry a credential in, configured as a source or not (SPEC 5),
 * and `proxy-authorization`: the gateway is the proxy it is meant for, and it is a credential.
 */
const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set([...credentialSourceSchema.options, 'proxy-authorization'])

/**
 * A credential header, also spelled with underscores (`x_api_key`): nginx with
 * `underscores_in_headers` and CGI-style stacks read it as the dashed one, a second credential.
 */
function isCredentialHeader(name: string): boolean {
  return CREDENTIAL_HEADERS.has(name.toLowerCase().replaceAll('_', '-'))
}

/**
 * Runtime routes (`execute`, `session-execute`) accept only a session token, sent upstream as
 * exactly `Authorization: Bearer <token>` (SPEC 5 table; V4 contract 5, rules 1-3).
 */
export function resolveRuntimeAuthorization(credential: PresentedCredential | null): string {
  if (credential === null) {
    throw new GatewayError('AUTH_INVALID', 'a session token is missing: send Authorization: Bearer <session token>')
  }
  assertNotServiceAccountId(credential)
  if (credential.kind === 'service-key') {
    throw new GatewayError('AUTH_INVALID',
      'a session token is missing: service keys are for admin/config APIs only; runtime calls need Authorization: Bearer <session token>')
  }
  return bearer(credential.value)
}

/**
 * Proxy (admin/config) routes: removes every credential header, then adds back the one
 * credential in the form V4 expects, so exactly one credential reaches the upstream (SPEC 5).
 * Returns a new object; the input is never mutated.
 */
export function rewriteProxyCredentialHeaders(headers: ForwardedHeaders, credential: PresentedCredential | null): ForwardedHeaders {
  if (credential !== null) assertNotServiceAccountId(credential)
  const entries: Array<[string, string | string[] | undefined]> = Object.entries(headers)
    .filter(([name]) => !isCredentialHeader(name))
    .map(([name, value]) => [name, Array.isArray(value) ? [...value] : value])
  if (credential?.kind === 'service-key') entries.push(['x-service-api-key', credential.value])
  if (credential?.kind === 'session-token') entries.push(['authorization', bearer(credential.value)])
  // fromEntries defines own properties, so even a `__proto__` header stays a plain header.
  return Object.fromEntries(entries)
}

/**
 * Removes the credential query parameter from a raw query string (without or with its leading
 * `?`), keeping the other parameters in order and byte for byte. Names are decoded the way
 * URLSearchParams decodes them, so an encoded name (`tok%65n`) that extraction read is removed too.
 * A query without it goes on as it came (SPEC 4: the query is kept); where it is removed, empty
 * segments (`a=1&&b=2`) go with it, as they carry nothing.
 */
export function removeQueryCredential(rawQuery: string, queryParam: string | null): string {
  if (queryParam === null) return rawQuery
  const prefix = rawQuery.startsWith('?') ? '?' : ''
  const segments = rawQuery.slice(prefix.length).split('&')
  if (!segments.some((segment) => queryName(segment) === queryParam)) return rawQuery
  const kept = segments.filter((segment) => segment !== '' && queryName(segment) !== queryParam).join('&')
  return kept === '' ? '' : prefix + kept
}

/** The query with the credential parameter's value replaced, for showing a request (explain) without its secret. */
export function redactQueryCredential(rawQuery: string, queryParam: string | null): string {
  if (queryParam === null) return rawQuery
  return rawQuery
    .split('&')
    .map((segment) => (queryName(segment) === queryParam ? `${segment.split('=', 1)[0]}=[redacted]` : segment))
    .join('&')
}

function queryName(segment: string): string | undefined {
  return new URLSearchParams(segment).keys().next().value
}

/** SPEC 5: a service-account id is an identifier, never a credential, on every route. */
function assertNotServiceAccountId(credential: PresentedCredential): void {
  if (credential.kind !== 'service-account-id') return
  throw new GatewayError('INVALID_CREDENTIAL_TYPE',
    'a service-account id is an identifier, never a credential: use a service key or a session token')
}

function bearer(token: string): string {
  return `Bearer ${token}`
}
