import { createHash, timingSafeEqual } from 'node:crypto'
import { GatewayError } from '../errors/registry.js'

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest()
}

/**
 * Checks `Authorization: Bearer <admin.token>` in constant time (SPEC 9). Comparing digests
 * keeps the comparison constant-time even when the lengths differ.
 */
export function assertAdminToken(expected: string | null, authorization: string | undefined): void {
  if (expected === null) return
  const match = /^bearer[ \t]+(\S+)$/i.exec(authorization ?? '')
  const presented = match?.[1]
  if (presented === undefined || !timingSafeEqual(digest(presented), digest(expected))) {
    throw new GatewayError('AUTH_INVALID', 'admin API calls need the admin token as a bearer token')
  }
}
