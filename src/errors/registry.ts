/**
 * Every error the gateway itself answers with (SPEC 6). One registry: the HTTP status, the
 * codes' type and docs/errors.md are all derived from or checked against this table.
 */
export const ERROR_STATUS = {
  INVALID_REQUEST: 400,
  CREDENTIALS_CONFLICT: 400,
  TENANT_REQUIRED: 400,
  AUTH_INVALID: 401,
  INVALID_CREDENTIAL_TYPE: 401,
  FORBIDDEN: 403,
  ROUTE_NOT_FOUND: 404,
  TENANT_UNKNOWN: 404,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  // Not in SPEC 6: malformed HTTP answered before fastify sees a request (RFC 9110 15.5.9, RFC 6585 5).
  REQUEST_TIMEOUT: 408,
  REQUEST_HEADERS_TOO_LARGE: 431,
  UPSTREAM_UNAVAILABLE: 502,
  UPSTREAM_BAD_RESPONSE: 502,
  OVERLOADED: 503,
  SHUTTING_DOWN: 503,
  UPSTREAM_TIMEOUT: 504,
  // SPEC 13: a scheduled brownout selects the client; the route is past an enforced sunset.
  LEGACY_BROWNOUT: 410,
  LEGACY_GONE: 410,
  // SPEC 6 rows of part two (sections 14-16).
  IDEMPOTENCY_IN_PROGRESS: 409,
  IDEMPOTENCY_KEY_REUSED: 422,
  IDEMPOTENCY_RESULT_TOO_LARGE: 409,
  LOOP_DETECTED: 508,
  // Not in SPEC 6: the admin listener's answer to a reload whose config file is invalid.
  CONFIG_INVALID: 400,
  // Not in SPEC 6: the answer to a gateway bug, so that even that keeps the envelope.
  INTERNAL_ERROR: 500
} as const satisfies Record<string, number>

export type ErrorCode = keyof typeof ERROR_STATUS

export interface ErrorDetail {
  /** JSON pointer (RFC 6901) into the request body, or a header/query name. */
  pointer: string
  message: string
}

/** An error the gateway answers with; callers match on `.code`, never on the class. */
export class GatewayError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  readonly details: ErrorDetail[] | undefined
  /** SPEC 13: `error.migration` of a brownout or gone answer (instants as ISO 8601 strings). */
  readonly migration: Readonly<Record<string, string>> | undefined

  constructor(code: ErrorCode, message: string, options: { details?: ErrorDetail[]; cause?: unknown; migration?: Readonly<Record<string, string>> } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'GatewayError'
    this.code = code
    this.statusCode = ERROR_STATUS[code]
    this.details = options.details
    this.migration = options.migration
  }
}

/** Matches on `code` and `name` (not `instanceof`), so errors from another copy of the module still count. */
export function isGatewayError(value: unknown): value is GatewayError {
  if (!(value instanceof Error) || value.name !== 'GatewayError') return false
  const code: unknown = (value as Error & { code?: unknown }).code
  return typeof code === 'string' && Object.hasOwn(ERROR_STATUS, code)
}

/**
 * Any thrown value as the gateway's answer: its own errors as they are; an error that carries a
 * 4xx `statusCode` (a request Node or fastify could not read) as INVALID_REQUEST; anything else
 * as INTERNAL_ERROR, so that even a bug keeps the envelope.
 */
export function toGatewayError(error: unknown): GatewayError {
  if (isGatewayError(error)) return error
  const statusCode = error instanceof Error ? (error as Error & { statusCode?: unknown }).statusCode : undefined
  if (typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500) {
    return new GatewayError('INVALID_REQUEST', 'the request could not be read', { cause: error })
  }
  return new GatewayError('INTERNAL_ERROR', 'the gateway failed to handle the request', { cause: error })
}
