import { hash } from 'node:crypto'
import type { IdempotencyConfig } from '../config/schema.js'
import { GatewayError } from '../errors/registry.js'
import type { RequestHead } from '../kernel/request-head.js'
import { nestedTooDeeply } from '../legacy/to-json-body.js'
import { canonicalJson } from '../util/canonical-json.js'

/** What SPEC 16 needs to run a keyed request once: its record, its fingerprint and its settings. */
export interface IdempotencyRequest {
  /** SHA-256 of (tenant, the credential's full SHA-256, route, key): the record's name, never the key itself. */
  readonly recordKey: string
  /** SHA-256 of the RFC 8785 JSON of `{ method, route, params, query, stateKey, body }`. */
  readonly fingerprint: string
  readonly settings: IdempotencyConfig
  /** Whose memory records the settings' `maxEntries` and `maxBytes` bound: the tenant's route (RecordBounds.group). */
  readonly boundsGroup: string
  /** How long a claim holds without renewal: 2 × (`upstreamTimeoutMs` + `connectTimeoutMs`). */
  readonly leaseMs: number
}

/** What the step read of the head: the key, before the body is. */
export interface IdempotencyKey {
  readonly key: string
  readonly settings: IdempotencyConfig
}

// RFC 8941 3.3.3: an sf-string is DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, printable ASCII.
const SF_STRING = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/
// SPEC 16: 1-255 visible ASCII characters.
const VISIBLE_KEY = /^[\x21-\x7e]{1,255}$/

/**
 * SPEC 16's key of a request: undefined when the route has no idempotency or the request no key
 * header (served as before, at the cost of one lookup). A key that parses as an sf-string is its
 * content; any other value is taken as sent; what is left must be 1-255 visible ASCII characters.
 */
export function readIdempotencyKey(settings: IdempotencyConfig | null | undefined, head: RequestHead): IdempotencyKey | undefined {
  if (settings == null) return undefined
  const raw = head.headers[settings.keyHeader]
  if (raw === undefined) return undefined
  // Node joins repeated lines with ", ": not one visible-ASCII key, so refused below.
  const value = Array.isArray(raw) ? raw.join(', ') : raw
  const quoted = SF_STRING.exec(value)
  const key = quoted === null ? value : (quoted[1] as string).replace(/\\(["\\])/g, '$1')
  if (!VISIBLE_KEY.test(key)) {
    // The value itself stays out of the message: a client may have put anything there.
    throw new GatewayError('INVALID_REQUEST', `the ${settings.keyHeader} header must be 1-255 visible ASCII characters, or an RFC 8941 string of them`, {
      details: [{ pointer: `header:${settings.keyHeader}`, message: 'expected 1-255 visible ASCII characters' }]
    })
  }
  return { key, settings }
}

export interface FingerprintInput {
  tenant: string
  /** The full SHA-256 of the presented credential (hex). */
  credentialHash: string
  route: string
  method: string
  params: Readonly<Record<string, string>>
  /** The query without the credential parameter (SPEC 5). */
  query: string
  stateKey: string
  body: Record<string, unknown>
}

/** SPEC 16's record name and fingerprint of a keyed request, once its body is read. */
export function buildIdempotencyRequest(keyed: IdempotencyKey, input: FingerprintInput, limits: { upstreamTimeoutMs: number; connectTimeoutMs: number }): IdempotencyRequest {
  const { tenant, credentialHash, route, method, params, query, stateKey, body } = input
  // Length-prefixed parts: no choice of values makes two tuples collide.
  const parts = [tenant, credentialHash, route, keyed.key].map((part) => `${part.length}:${part}`).join('')
  return {
    recordKey: hash('sha256', parts, 'hex'),
    fingerprint: hash('sha256', wellFormed(canonicalText({ method, route, params, query, stateKey, body })), 'hex'),
    settings: keyed.settings,
    boundsGroup: `${tenant}\u0000${route}`,
    leaseMs: 2 * (limits.upstreamTimeoutMs + limits.connectTimeoutMs)
  }
}

/**
 * The fingerprint's RFC 8785 text. Its recursion runs out of stack some levels before
 * JSON.stringify's: such a body is refused as the translation refuses one too deep for that
 * (a 400, never a 500).
 */
function canonicalText(fields: Record<string, unknown>): string {
  try {
    return canonicalJson(fields)
  } catch (error) {
    if (!(error instanceof RangeError)) throw error
    throw nestedTooDeeply()
  }
}

/** JSON.stringify escapes lone surrogates already; this only guards the hash's UTF-8 encoding. */
function wellFormed(text: string): string {
  return text.isWellFormed() ? text : text.toWellFormed()
}
