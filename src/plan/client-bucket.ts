import { hash } from 'node:crypto'

const BUCKETS = 10_000n

/**
 * SPEC 13's bucket of a client, and SPEC 14's with `"canary"` for `purpose`: `(first 8 bytes of
 * SHA-256(purpose + "\0" + tenant + "\0" + client id), unsigned big-endian) mod 10000`. No route
 * and no replica in it: a client falls in the same bucket on every route of its tenant and on
 * every replica, with no coordination, and a higher percentage only adds buckets.
 */
export function clientBucket(purpose: 'brownout' | 'canary', tenant: string, clientId: string): number {
  const digest = hash('sha256', `${purpose}\0${tenant}\0${clientId}`, 'hex')
  return Number(BigInt(`0x${digest.slice(0, 16)}`) % BUCKETS)
}
