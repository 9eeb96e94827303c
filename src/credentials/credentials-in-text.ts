/**
 * Credentials pasted into text that is logged or kept (an admin call's `reason`, a member name
 * of an answer): found by their shape, since the text is not a credential source (SPEC 5). A
 * heuristic, leaning to mask: a word is masked in place, so the rest of the text stays readable.
 */

const MASK = '[redacted]'

/**
 * After `Bearer ` or `Basic ` (RFC 9110 11.4) any word is a credential; after `Token ` (SPEC 5's
 * other scheme, and an English word) one that opens the text (an Authorization value pasted
 * whole), has a digit or is 20 characters or more, so that "token refresh fails" stays as written.
 */
const SCHEME_AND_VALUE = /\b(bearer|basic)(\s+)\S+|(?:^\s*|\b(?=token\s+(?:\S*\d|\S{20,})))(token)(\s+)\S+/gi

/**
 * Whether `word` reads as a service key (SPEC 5: its prefix, `key_` by default): the prefix and
 * then at least 6 characters holding a digit, or 16 characters or more, as generated keys are
 * (`key_live_4f1c9a`, `key_AbCdEfGhIjKlMnOpQr`), so that names such as `key_id` or
 * `key_rotation` are not taken for one.
 */
export function looksLikeServiceKey(word: string, serviceKeyPrefix: string): boolean {
  if (!word.startsWith(serviceKeyPrefix)) return false
  const rest = word.slice(serviceKeyPrefix.length)
  return rest.length >= 16 || (rest.length >= 6 && /\d/.test(rest))
}

/** `token=…`, `password: …`, `api_key=…`, `access_token=…`, `client_secret: …`: a value given its name in the text. */
const NAMED_VALUE = /(?<![A-Za-z0-9])(token|secret|passw(?:or)?d|api[-_]?key|authorization|cookie)(\s*[=:]\s*)[^\s,;]+/gi

/** `text` with every credential it shows replaced by `[redacted]`: a scheme's value, a named value, a service key. */
export function maskCredentials(text: string, serviceKeyPrefix: string): string {
  const masked = text
    .replace(SCHEME_AND_VALUE, (_match, scheme?: string, space?: string, tokenScheme?: string, tokenSpace?: string) =>
      scheme !== undefined ? `${scheme}${space ?? ' '}${MASK}` : `${tokenScheme ?? 'token'}${tokenSpace ?? ' '}${MASK}`
    )
    .replace(NAMED_VALUE, (_match, name: string, separator: string) => `${name}${separator}${MASK}`)
  return masked.replace(/[^\s,;=:'"`/()[\]{}<>]+/g, (word) => (looksLikeServiceKey(word, serviceKeyPrefix) ? MASK : word))
}
