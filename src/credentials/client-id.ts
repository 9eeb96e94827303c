import { hash } from 'node:crypto'

/**
 * SPEC 12's client ids. A client id is never a credential: the credential source gives `fp:` and
 * 16 hex digits of its SHA-256; a header source its value when it is plainly an id, else a hash.
 */

/** The id of a request that no source of `clients.key` gave a value for. */
export const ANONYMOUS = 'anonymous'

/** A header value that is plainly an id: `hdr:<value>` (SPEC 12). */
const SAFE_HEADER_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** `fp:` and the first 16 hex digits of a credential's SHA-256, given as hex (`fingerprintToken`), so a request hashes it once. */
export function clientIdOfFingerprint(sha256Hex: string): string {
  return `fp:${sha256Hex.slice(0, 16)}`
}

/** `fp:` and the first 16 hex digits of the SHA-256 of a credential as SPEC 5 reads it. */
export function credentialClientId(credential: string): string {
  return clientIdOfFingerprint(hash('sha256', credential, 'hex'))
}

/**
 * `hdr:<value>` when the value is 1-128 of `[A-Za-z0-9._:-]`, else `hdr#` and 16 hex digits of the
 * SHA-256 of its bytes. `encoding` says how the string holds them: Node's HTTP parser gives each
 * byte of a header value as one character (`latin1`), `v4gw fingerprint --header` reads text
 * (`utf8`); either way a value sent as UTF-8 gets the same id.
 */
export function headerClientId(value: string, encoding: 'latin1' | 'utf8'): string {
  return SAFE_HEADER_ID.test(value) ? `hdr:${value}` : `hdr#${hash('sha256', Buffer.from(value, encoding), 'hex').slice(0, 16)}`
}

/** A source of `clients.key` as the request path reads it: resolved at load, so a request only compares. */
export type ClientKeySource = { readonly kind: 'credential' } | { readonly kind: 'header'; readonly name: string }

export function compileClientKey(key: readonly string[]): readonly ClientKeySource[] {
  return Object.freeze(key.map((source) => Object.freeze(source === 'credential' ? { kind: 'credential' as const } : { kind: 'header' as const, name: source.slice('header:'.length) })))
}

/**
 * The first source of `key` that yields a value gives the id (SPEC 12), else `anonymous`.
 * `header` reads a header as Node parses and joins it (lower-case name, one character per byte);
 * `credentialFingerprint` is asked only when the credential source is reached, and gives the
 * SHA-256 hex of the credential the request presents, or undefined without one. An empty header
 * value yields nothing.
 */
export function resolveClientId(
  key: readonly ClientKeySource[],
  header: (name: string) => string | undefined,
  credentialFingerprint: () => string | undefined
): string {
  // Indexed: `key` is frozen, and for-of over a frozen array is several times slower.
  for (let index = 0; index < key.length; index++) {
    const source = key[index] as ClientKeySource
    if (source.kind === 'header') {
      const value = header(source.name)
      if (value !== undefined && value !== '') return headerClientId(value, 'latin1')
    } else {
      const fingerprint = credentialFingerprint()
      if (fingerprint !== undefined) return clientIdOfFingerprint(fingerprint)
    }
  }
  return ANONYMOUS
}
