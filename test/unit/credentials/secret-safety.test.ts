import { describe, it, expect } from 'vitest'
import {
  extractCredential,
  resolveRuntimeAuthorization,
  rewriteProxyCredentialHeaders
} from '../../../src/credentials/index.js'
import type { PresentedCredential } from '../../../src/credentials/index.js'
import type { GatewayError } from '../../../src/errors/registry.js'
import { credentialsConfig, thrownBy } from './fixtures.js'

// Distinctive values, so a leak of any part of them is easy to spot.
const SECRETS = {
  session: 'SeCrEt-SeSsIoN-7f3a',
  otherSession: 'SeCrEt-OtHeR-91bc',
  key: 'key_SeCrEt-KeY-55d1',
  otherKey: 'key_SeCrEt-KeY2-0e4f',
  account: 'sa_SeCrEt-AcCoUnT-c2d8'
}
const config = credentialsConfig({ queryParam: 'access_token' })

/** Every error path of the module, each fed with the secrets above. */
const failures: Array<[string, () => unknown]> = [
  ['conflict across headers', () => extractCredential({ authorization: [`Bearer ${SECRETS.session}`], 'x-api-key': [SECRETS.key] }, null, config)],
  ['conflict in a repeated header', () => extractCredential({ 'x-api-key': [SECRETS.key, SECRETS.otherKey] }, null, config)],
  ['conflict with the query', () => extractCredential({ 'x-session-token': [SECRETS.session] }, new URLSearchParams(`access_token=${SECRETS.otherSession}`), config)],
  ['conflict between key_ and sa_', () => extractCredential({ 'x-api-key': [SECRETS.key], 'x-service-api-key': [SECRETS.account] }, null, config)],
  ['unsupported scheme', () => extractCredential({ authorization: [`Basic ${SECRETS.session}`] }, null, config)],
  ['whitespace inside', () => extractCredential({ authorization: [`Bearer ${SECRETS.session} ${SECRETS.otherSession}`] }, null, config)],
  ['control character', () => extractCredential({ 'x-session-token': [`${SECRETS.session}\u0001`] }, null, config)],
  ['too long', () => extractCredential({ 'x-api-key': [SECRETS.key.repeat(400)] }, null, config)],
  ['whitespace in the query', () => extractCredential({}, new URLSearchParams(`access_token=${SECRETS.session}+x`), config)],
  ['runtime with a service key', () => resolveRuntimeAuthorization(presented(SECRETS.key, 'service-key'))],
  ['runtime with a service-account id', () => resolveRuntimeAuthorization(presented(SECRETS.account, 'service-account-id'))],
  ['proxy with a service-account id', () => rewriteProxyCredentialHeaders({ 'x-api-key': SECRETS.account }, presented(SECRETS.account, 'service-account-id'))]
]

function presented(value: string, kind: PresentedCredential['kind']): PresentedCredential {
  return { value, kind, origins: ['x-api-key'] }
}

/** Everything an error carries that could reach a client or a log line. */
function visibleText(error: GatewayError): string {
  return [error.message, JSON.stringify(error.details ?? []), String(error), error.stack ?? ''].join('\n')
}

describe('secret safety', () => {
  it.each(failures)('keeps every credential value out of the message and details of the error for %s', (_name, action) => {
    const text = visibleText(thrownBy(action))
    for (const secret of Object.values(SECRETS)) {
      expect(text).not.toContain(secret)
      // The distinctive middle of each secret, in case a prefix or scheme was stripped or a slice was logged.
      expect(text).not.toContain(secret.replace(/^(key_|sa_)/, '').slice(0, 12))
    }
  })
})
