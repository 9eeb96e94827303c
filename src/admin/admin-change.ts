import type { FastifyRequest } from 'fastify'
import { maskCredentials } from '../credentials/index.js'
import { isPlainObject } from '../util/is-plain-object.js'

/**
 * The members the admin calls that change state take, in a body or a query (SPEC 12-15): only
 * these are logged with their values. Any other is refused by its endpoint anyway, and may be a
 * secret pasted in the wrong place, so its value is not logged (its name is, masked as text).
 */
const AUDITED_MEMBERS: ReadonlySet<string> = new Set(['tenant', 'route', 'stage', 'reason', 'until', 'all'])
/** A body past this many characters of JSON is logged with its members cut (boundedBody): a log line is not a store. */
const MAX_LOGGED_BODY_CHARS = 4_096
const REDACTED = '[redacted]'

/**
 * A request body or query as the `admin change` line may show it: the operator's own words (a
 * `reason`) kept, any credential in them masked. SPEC 9 keeps credentials out of every log line,
 * and an admin body is typed by hand, where a token pasted in the wrong place is a common slip:
 * a member the call does not take is shown by its name only, a body that is not an object (no
 * call takes one) not at all, and a credential inside a value or a name is masked in place
 * (credentials/credentials-in-text.ts).
 */
export function redactForAudit(value: unknown, serviceKeyPrefix: string): unknown {
  if (value === undefined || value === null) return value
  if (!isPlainObject(value)) return REDACTED
  return Object.fromEntries(
    Object.entries(value).map(([key, member]) => [maskCredentials(key, serviceKeyPrefix), AUDITED_MEMBERS.has(key) ? auditedValue(member, serviceKeyPrefix) : REDACTED])
  )
}

/** A member's value: a scalar as sent, a credential in it masked; an array or object (no call takes one) not shown. */
function auditedValue(value: unknown, serviceKeyPrefix: string): unknown {
  if (typeof value === 'string') return maskCredentials(value, serviceKeyPrefix)
  if (value === null || value === undefined || typeof value === 'number' || typeof value === 'boolean') return value
  return REDACTED
}

/**
 * The `admin change` line (SPEC 14): one `warn` line per admin call that changes state, once the
 * call is accepted (Host, token and body checked) and before it runs, so that a call that then
 * fails or hangs is on record too. Its fields: the endpoint, the body and query (redacted), the
 * client address (the TCP peer) and the request id. No header is logged, so neither is the
 * admin token.
 */
export function logAdminChange(request: FastifyRequest, serviceKeyPrefix: string): void {
  const body = redactForAudit(request.body, serviceKeyPrefix)
  const text = body === undefined ? '' : JSON.stringify(body)
  request.log.warn(
    {
      endpoint: endpointOf(request),
      query: redactForAudit(request.query, serviceKeyPrefix),
      body: text.length > MAX_LOGGED_BODY_CHARS ? boundedBody(body, text.length) : (body ?? null),
      clientAddress: request.socket.remoteAddress,
      requestId: request.id
    },
    'admin change'
  )
  changesLogged.add(request)
}

/** Requests whose `admin change` line is written: their refusal or failure gets a line too. */
const changesLogged = new WeakSet<FastifyRequest>()

/**
 * After an admin change's answer: one accepted (its `admin change` line written) and then refused
 * for what it asked (an unread query key, a body its endpoint refuses: 4xx) or failed (5xx) gets
 * a `warn` line saying so, so that its change line never reads as a change made. The admin
 * listener writes no access line, and no line for its 4xx errors. Heard when the answer has gone:
 * a client that left first leaves only the change line (fastify runs no onResponse then).
 */
export function logAdminChangeOutcome(request: FastifyRequest, statusCode: number): void {
  if (statusCode < 400 || !changesLogged.has(request)) return
  request.log.warn({ endpoint: endpointOf(request), status: statusCode, requestId: request.id }, statusCode < 500 ? 'admin change refused' : 'admin change failed')
}

/** The call as the lines name it: its method and route (`DELETE /admin/sessions`), never its query. */
function endpointOf(request: FastifyRequest): string {
  return `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]}`
}

/** A logged string past this many characters is cut (a body logged whole is under 4 KiB anyway). */
const MAX_LOGGED_STRING_CHARS = 1_000
/** Members of a body logged past MAX_LOGGED_BODY_CHARS, at most: the calls take six. */
const MAX_LOGGED_MEMBERS = 16

/**
 * A body too long to log whole: its members still (SPEC 14: "the body (reason included)", and
 * what the change targets, its tenant, route and stage), each string cut to 1,000 characters and
 * past 16 members none, with its size; escaping alone can make a 1,000-character reason six times
 * as much JSON. Anything else (a body that is not an object) by its size only.
 */
function boundedBody(body: unknown, chars: number): unknown {
  const size = `(${chars} characters of JSON: strings cut at ${MAX_LOGGED_STRING_CHARS} characters, members past ${MAX_LOGGED_MEMBERS} left out)`
  if (!isPlainObject(body)) return `(${chars} characters of JSON, not logged)`
  // The members the calls take first (the reason, what the change targets), whatever the body's
  // order (keys that read as integers come first in any object), then the others up to the bound.
  const entries = Object.entries(body)
  const ordered = [...entries.filter(([key]) => AUDITED_MEMBERS.has(key)), ...entries.filter(([key]) => !AUDITED_MEMBERS.has(key))]
  const members = ordered.slice(0, MAX_LOGGED_MEMBERS).map(([key, value]) => [cut(key), typeof value === 'string' ? cut(value) : value])
  return { ...Object.fromEntries(members), '(size)': size }
}

function cut(text: string): string {
  return text.length <= MAX_LOGGED_STRING_CHARS ? text : `${text.slice(0, MAX_LOGGED_STRING_CHARS)}…`
}
