import type { CredentialLookup } from './credential-directory.js'
import { SimulatorError } from './errors.js'
import { SERVICE_ACCOUNT_PREFIX, SERVICE_KEY_PREFIX } from './options.js'
import type { SimulatorIdentity } from './types.js'

// Messages never repeat a presented value: they may be secrets.

export interface PresentedCredentials {
  /** Every Authorization line, in order. */
  authorizations: string[]
  /** Every x-service-api-key line, in order. */
  serviceApiKeys: string[]
}

/**
 * The credential lines as sent, from the raw header list: Node keeps only the first `Authorization`
 * and joins repeated `x-service-api-key` lines into one value, so a second copy (which native
 * passthrough forwards as is, SPEC 7) would otherwise never be judged.
 */
export function readPresentedCredentials (rawHeaders: readonly string[]): PresentedCredentials {
  const presented: PresentedCredentials = { authorizations: [], serviceApiKeys: [] }
  for (let index = 0; index + 1 < rawHeaders.length; index += 2) {
    const name = (rawHeaders[index] as string).toLowerCase()
    if (name === 'authorization') presented.authorizations.push(rawHeaders[index + 1] as string)
    else if (name === 'x-service-api-key') presented.serviceApiKeys.push(rawHeaders[index + 1] as string)
  }
  return presented
}

/** Rule 3 (contract part 5): an sa_* identifier sent as an API key fails the call, whatever else came with it. */
function rejectServiceAccountKey (presented: PresentedCredentials, message: string): void {
  if (presented.serviceApiKeys.some((key) => key.trim().startsWith(SERVICE_ACCOUNT_PREFIX))) {
    throw new SimulatorError('INVALID_CREDENTIAL_TYPE', message)
  }
}

/** The token of a `Bearer` Authorization value (scheme case-insensitive, RFC 9110 11.1), else undefined. */
export function parseBearerToken (authorization: string): string | undefined {
  const match = /^(\S+)(?:[ \t]+(.*))?$/.exec(authorization.trim())
  if (match === null || match[1]?.toLowerCase() !== 'bearer') return undefined
  return (match[2] ?? '').trim()
}

function rejectNonSessionToken (token: string): void {
  if (token.startsWith(SERVICE_KEY_PREFIX)) {
    throw new SimulatorError('AUTH_INVALID', 'missing session token: service keys (key_*) are for admin/config APIs only')
  }
  if (token.startsWith(SERVICE_ACCOUNT_PREFIX)) {
    throw new SimulatorError('INVALID_CREDENTIAL_TYPE', 'invalid credential type: an sa_* service-account identifier is never a credential')
  }
}

/**
 * Contract part 5, rules 1-3: runtime endpoints accept only `Authorization: Bearer <session-token>`.
 * A `key_*` service key sent alongside a valid bearer token is ignored, as the contract only names
 * what is accepted; an `sa_*` identifier in its place fails the call (rule 3).
 */
export function resolveRuntimeIdentity (presented: PresentedCredentials, lookup: CredentialLookup): SimulatorIdentity {
  rejectServiceAccountKey(presented, 'invalid API key: an sa_* service-account identifier is never a credential')
  const [authorization, ...more] = presented.authorizations
  if (authorization === undefined) {
    throw new SimulatorError('AUTH_INVALID', presented.serviceApiKeys.length === 0
      ? 'missing session token: send Authorization: Bearer <session-token>'
      : 'missing session token: x-service-api-key is for admin/config APIs only; send Authorization: Bearer <session-token>')
  }
  // RFC 9110 11.6.2: Authorization is a single field; two lines are two credentials.
  if (more.length > 0) throw new SimulatorError('CREDENTIALS_AMBIGUOUS', 'send exactly one Authorization header')
  const token = parseBearerToken(authorization)
  if (token === undefined) {
    throw new SimulatorError('AUTH_INVALID', 'missing session token: Authorization must use the Bearer scheme')
  }
  if (token === '') throw new SimulatorError('AUTH_INVALID', 'missing session token')
  rejectNonSessionToken(token)
  const identity = lookup.findSessionToken(token)
  if (identity === undefined) throw new SimulatorError('AUTH_INVALID', 'unknown session token')
  return identity
}

function resolveServiceKeyIdentity (serviceApiKey: string, lookup: CredentialLookup): SimulatorIdentity {
  const key = serviceApiKey.trim()
  if (key.startsWith(SERVICE_ACCOUNT_PREFIX)) {
    throw new SimulatorError('INVALID_CREDENTIAL_TYPE', 'invalid API key: an sa_* service-account identifier is never a credential; send a key_* service-account token')
  }
  if (!key.startsWith(SERVICE_KEY_PREFIX)) {
    throw new SimulatorError('AUTH_INVALID', 'invalid API key: x-service-api-key must carry a key_* service-account token')
  }
  const found = lookup.lookupServiceKey(key)
  if (found.status === 'revoked') throw new SimulatorError('AUTH_REVOKED', 'service-account token has been revoked')
  if (found.status === 'unknown') throw new SimulatorError('AUTH_INVALID', 'unknown service-account token')
  return found.identity
}

function resolveBearerAdminIdentity (authorization: string, lookup: CredentialLookup): SimulatorIdentity {
  const token = parseBearerToken(authorization)
  if (token === undefined || token === '') {
    throw new SimulatorError('AUTH_INVALID', 'invalid credential: Authorization must be Bearer <session-token>')
  }
  if (token.startsWith(SERVICE_KEY_PREFIX)) {
    // Contract part 5: the key_* secret travels in x-service-api-key, never as a bearer token.
    throw new SimulatorError('AUTH_INVALID', 'invalid credential: send service keys (key_*) in x-service-api-key, not Authorization')
  }
  rejectNonSessionToken(token)
  const identity = lookup.findSessionToken(token)
  if (identity === undefined) throw new SimulatorError('AUTH_INVALID', 'unknown session token')
  return identity
}

/**
 * Admin/config endpoints: an `x-service-api-key` service key or a bearer session token, exactly one.
 * Two credentials are refused so that gateway tests can prove exactly one reached the upstream (SPEC 5),
 * after rule 3: an `sa_*` sent as the API key fails as such whatever else came with it, as on runtime routes.
 */
export function resolveAdminIdentity (presented: PresentedCredentials, lookup: CredentialLookup): AdminCaller {
  rejectServiceAccountKey(presented, 'invalid API key: an sa_* service-account identifier is never a credential; send a key_* service-account token')
  const { authorizations, serviceApiKeys } = presented
  if (authorizations.length + serviceApiKeys.length > 1) {
    throw new SimulatorError('CREDENTIALS_AMBIGUOUS', 'send exactly one credential: one x-service-api-key or one Authorization, not both or two of either')
  }
  if (serviceApiKeys[0] !== undefined) return { identity: resolveServiceKeyIdentity(serviceApiKeys[0], lookup), credential: 'service-key' }
  if (authorizations[0] !== undefined) return { identity: resolveBearerAdminIdentity(authorizations[0], lookup), credential: 'session-token' }
  throw new SimulatorError('AUTH_INVALID', 'missing credential: send x-service-api-key: <key_*> or Authorization: Bearer <session-token>')
}

/** Who calls an admin endpoint, and with which kind of credential. */
export interface AdminCaller {
  identity: SimulatorIdentity
  credential: 'service-key' | 'session-token'
}

export const ADMIN_ROLE = 'admin'

/**
 * Contract part 5, rule 4: a *session token* on an admin-only mutation without the admin role is
 * forbidden. An active service-account token's admin call succeeds (part 3's table), roles or not.
 */
export function assertMayMutate ({ identity, credential }: AdminCaller): void {
  if (credential === 'session-token' && !identity.roles.includes(ADMIN_ROLE)) {
    throw new SimulatorError('FORBIDDEN', `forbidden: this mutation needs the ${ADMIN_ROLE} role`)
  }
}
