import { describe, it, expect } from 'vitest'
import { classifyCredential } from '../../../src/credentials/index.js'
import { credentialsConfig } from './fixtures.js'

describe('classifyCredential', () => {
  it('classifies a key_ value as a service-key', () => {
    expect(classifyCredential('key_abc', credentialsConfig())).toBe('service-key')
  })

  it('classifies an sa_ value as a service-account-id', () => {
    expect(classifyCredential('sa_abc', credentialsConfig())).toBe('service-account-id')
  })

  it('classifies any other value as a session-token', () => {
    expect(classifyCredential('eyJhbGciOi.abc.def', credentialsConfig())).toBe('session-token')
  })

  it('classifies by prefix only, so a value that merely contains key_ is a session-token', () => {
    expect(classifyCredential('my_key_abc', credentialsConfig())).toBe('session-token')
  })

  it('uses a custom serviceKeyPrefix and no longer treats key_ as a service-key', () => {
    const config = credentialsConfig({ serviceKeyPrefix: 'svc-' })
    expect(classifyCredential('svc-abc', config)).toBe('service-key')
    expect(classifyCredential('key_abc', config)).toBe('session-token')
  })

  it('uses a custom serviceAccountPrefix and no longer treats sa_ as a service-account-id', () => {
    const config = credentialsConfig({ serviceAccountPrefix: 'acct-' })
    expect(classifyCredential('acct-abc', config)).toBe('service-account-id')
    expect(classifyCredential('sa_abc', config)).toBe('session-token')
  })

  it('checks the service-key prefix first when both prefixes match', () => {
    const config = credentialsConfig({ serviceKeyPrefix: 'k', serviceAccountPrefix: 'key_' })
    expect(classifyCredential('key_abc', config)).toBe('service-key')
  })
})
