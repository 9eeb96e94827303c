import type { Meta } from './meta.js'

/**
 * Every code the simulated V4 backend answers with, and its status. The gateway has its own
 * registry (SPEC 6); these are the backend's words, which the gateway passes through unchanged.
 */
export const SIMULATOR_ERROR_STATUS = {
  INVALID_REQUEST: 400,
  CREDENTIALS_AMBIGUOUS: 400,
  AUTH_INVALID: 401,
  AUTH_REVOKED: 401,
  INVALID_CREDENTIAL_TYPE: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  SESSION_NOT_FOUND: 404,
  SESSION_EXPIRED: 410,
  LIMIT_REACHED: 409,
  PAYLOAD_TOO_LARGE: 413,
  REQUEST_TIMEOUT: 408,
  REQUEST_HEADERS_TOO_LARGE: 431,
  INTERNAL_ERROR: 500,
  SHUTTING_DOWN: 503
} as const satisfies Record<string, number>

export type SimulatorErrorCode = keyof typeof SIMULATOR_ERROR_STATUS

export class SimulatorError extends Error {
  readonly code: SimulatorErrorCode
  readonly statusCode: number

  constructor (code: SimulatorErrorCode, message: string) {
    super(message)
    this.name = 'SimulatorError'
    this.code = code
    this.statusCode = SIMULATOR_ERROR_STATUS[code]
  }
}

export interface ErrorBody {
  error: { code: SimulatorErrorCode; message: string }
  meta: Meta
}

export function buildErrorBody (error: SimulatorError, meta: Meta): ErrorBody {
  return { error: { code: error.code, message: error.message }, meta }
}

function readStatusCode (error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null || !('statusCode' in error)) return undefined
  return typeof error.statusCode === 'number' ? error.statusCode : undefined
}

/** Total: anything thrown while serving a request becomes one of the simulator's codes. */
export function mapToSimulatorError (error: unknown): SimulatorError {
  if (error instanceof SimulatorError) return error
  const statusCode = readStatusCode(error)
  if (statusCode === 413) return new SimulatorError('PAYLOAD_TOO_LARGE', 'request body is too large')
  // Fastify's own 4xx answers (bad JSON, bad content-type header, bad URL) are all malformed requests.
  if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
    return new SimulatorError('INVALID_REQUEST', 'request could not be parsed: the body must be valid JSON')
  }
  return new SimulatorError('INTERNAL_ERROR', 'internal simulator error')
}
