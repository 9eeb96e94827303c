import type { IncomingHttpHeaders } from 'node:http'

/**
 * Fields of which Node keeps only the first copy (lib/_http_incoming.js, `matchKnownFields`):
 * a second one is dropped from `IncomingMessage#headers` (it stays in `rawHeaders`).
 */
const FIRST_ONLY: ReadonlySet<string> = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent'
])

/**
 * `IncomingMessage#headers` as Node builds it from raw header lines, so that `explain` plans
 * from the same joined view the live listener reads: names lower-cased, the FIRST_ONLY fields
 * keep their first copy, `set-cookie` a list, `cookie` joined with "; ", the rest with ", ".
 * A contract test holds it to Node's own parser over a socket.
 */
export function headersFromRaw(rawHeaders: readonly string[]): IncomingHttpHeaders {
  const headers: Record<string, string | string[]> = {}
  for (let index = 0; index < rawHeaders.length; index += 2) {
    const name = (rawHeaders[index] as string).toLowerCase()
    const value = rawHeaders[index + 1] as string
    // Own fields only, as Node's `typeof dest[field] === 'string'`: a `constructor` field is not
    // joined to Object's. A `__proto__` field is dropped, as Node drops it (a string cannot be a prototype).
    const previous = Object.hasOwn(headers, name) ? headers[name] : undefined
    if (name === 'set-cookie') headers[name] = previous === undefined ? [value] : [...(previous as string[]), value]
    else if (previous === undefined) headers[name] = value
    else if (FIRST_ONLY.has(name)) continue
    else headers[name] = `${previous as string}${name === 'cookie' ? '; ' : ', '}${value}`
  }
  return headers as IncomingHttpHeaders
}
