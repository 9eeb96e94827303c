import type { OutgoingHttpHeaders } from 'node:http'
import { appendLink } from './link-header.js'

/**
 * Puts the gateway's own headers for a request (request id, deprecation, …) over an upstream
 * answer's: the gateway's win, except `Link`, where both are kept (the upstream's, then ours).
 */
export function putOwnHeaders(headers: OutgoingHttpHeaders, own: OutgoingHttpHeaders): OutgoingHttpHeaders {
  for (const name in own) {
    const value = own[name]
    if (value === undefined) continue
    headers[name] = name === 'link' ? appendLink(headers.link, String(value)) : value
  }
  return headers
}
