import type { CredentialsConfig } from '../config/schema.js'

export type CredentialKind = 'session-token' | 'service-key' | 'service-account-id'

/**
 * SPEC 5: the kind of a presented value is decided by its prefix alone, service key first,
 * then service-account id; anything else is an opaque session token.
 */
export function classifyCredential(value: string, config: CredentialsConfig): CredentialKind {
  if (value.startsWith(config.serviceKeyPrefix)) return 'service-key'
  if (value.startsWith(config.serviceAccountPrefix)) return 'service-account-id'
  return 'session-token'
}
