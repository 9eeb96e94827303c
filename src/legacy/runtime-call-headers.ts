import type { IncomingHttpHeaders } from 'node:http'
import { forwardedHeaders } from '../util/forwarded-headers.js'

/**
 * Headers of every V4 call made for a legacy runtime request: one credential, and nothing else
 * of the client's but its agent. Also what `explain` shows.
 */
export function runtimeCallHeaders(
  incoming: IncomingHttpHeaders,
  clientAddress: string | undefined,
  protocol: string,
  requestId: string,
  authorization: string
): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json',
    // The gateway reads these answers, so it asks for them uncompressed.
    'accept-encoding': 'identity',
    authorization,
    'x-request-id': requestId,
    ...forwardedHeaders(incoming, clientAddress, protocol)
  }
  const userAgent = incoming['user-agent']
  if (userAgent !== undefined) headers['user-agent'] = userAgent
  return headers
}
