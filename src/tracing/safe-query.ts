import { removeQueryCredential } from '../credentials/index.js'

/**
 * Query parameters whose values the HTTP semantic conventions have instrumentations redact by
 * default (`url.query`, `url.full`): signed-URL signatures and access keys.
 */
const SIGNATURE_PARAMETERS = new Set(['AWSAccessKeyId', 'Signature', 'sig', 'X-Goog-Signature'])

/**
 * A query (without its `?`) as a span may hold it (SPEC 17): without the query credential of
 * SPEC 5, whatever the route (a native request's is passed on, but never recorded), and with the
 * values of the signature parameters replaced by `REDACTED`.
 */
export function safeQuery(rawQuery: string, queryCredential: string | null): string {
  if (rawQuery === '') return ''
  const kept = removeQueryCredential(rawQuery, queryCredential)
  if (kept === '') return ''
  return kept
    .split('&')
    .map((segment) => {
      const equals = segment.indexOf('=')
      if (equals === -1) return segment
      const name = safeDecode(segment.slice(0, equals))
      return SIGNATURE_PARAMETERS.has(name) ? `${segment.slice(0, equals)}=REDACTED` : segment
    })
    .join('&')
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '))
  } catch {
    return text
  }
}
