import { expect } from 'vitest'
import type { CredentialsConfig } from '../../../src/config/schema.js'
import { isGatewayError } from '../../../src/errors/registry.js'
import type { GatewayError } from '../../../src/errors/registry.js'

/** The SPEC 8 defaults, with overrides. */
export function credentialsConfig(overrides: Partial<CredentialsConfig> = {}): CredentialsConfig {
  return {
    serviceKeyPrefix: 'key_',
    serviceAccountPrefix: 'sa_',
    queryParam: null,
    sources: ['authorization', 'x-session-token', 'x-api-key', 'x-service-api-key'],
    ...overrides
  }
}

/** Runs `action` and returns the GatewayError it throws; fails the test when it throws nothing else. */
export function thrownBy(action: () => unknown): GatewayError {
  try {
    action()
  } catch (error) {
    expect(isGatewayError(error)).toBe(true)
    return error as GatewayError
  }
  throw new Error('expected a GatewayError, nothing was thrown')
}
