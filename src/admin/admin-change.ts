import type { FastifyRequest } from 'fastify'
import { isPlainObject } from '../util/is-plain-object.js'

/** A member whose name says it holds a credential; its value is never logged. */
const CREDENTIAL_NAME = /token|secret|passw|credential|api[-_]?key|authorization|cookie/i
/** A value that carries its own scheme (`Bearer …`, `Basic …`), wherever it is. */
const CREDENTIAL_VALUE = /^\s*(bearer|basic)\s/i
/** A body past this many characters of JSON is named by its size: a log line is not a store. */
const MAX_LOGGED_BODY_CHARS = 4_096
const REDACTED = '[redacted]'

/**
 * A request body or query as the `admin change` line may show it: the operator's own words (a
 * `reason`) kept, anything that could be a credential replaced. SPEC 9 keeps credentials out
 * of every log line, and an admin body is typed by hand, where a token pasted in the wrong place
 * is a common slip.
 */
export function redactForAudit(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return CREDENTIAL_VALUE.test(value) ? REDACTED : value
  if (depth > 8) return '[nested too deeply]'
  if (Array.isArray(value)) return value.map((item) => redactForAudit(item, depth + 1))
  if (isPlainObject(value)) {
    return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, CREDENTIAL_NAME.test(key) ? REDACTED : redactForAudit(member, depth + 1)]))
  }
  return value
}

/**
 * The `admin change` line (SPEC 14): one `warn` line per admin call that changes state, once the
 * call is accepted (Host, token and body checked) and before it runs, so that a call that then
 * fails or hangs is on record too. Its fields: the endpoint, the body and query (redacted), the
 * client address (the TCP peer) and the request id. No header is logged, so neither is the
 * admin token.
 */
export function logAdminChange(request: FastifyRequest): void {
  const body = redactForAudit(request.body)
  const text = body === undefined ? '' : JSON.stringify(body)
  request.log.warn(
    {
      endpoint: `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]}`,
      query: redactForAudit(request.query),
      body: text.length > MAX_LOGGED_BODY_CHARS ? `(${text.length} characters of JSON, not logged)` : (body ?? null),
      clientAddress: request.socket.remoteAddress,
      requestId: request.id
    },
    'admin change'
  )
}
