import type { ErrorDetail, GatewayError } from './registry.js'

export interface ErrorBody {
  error: { code: string; message: string; requestId: string; details?: ErrorDetail[]; migration?: Readonly<Record<string, string>> }
  meta: { requestId: string; timingMs: { total: number } }
}

/** SPEC 6: "content-type `application/json`", as written: RFC 8259 defines no charset for it. */
export const ERROR_CONTENT_TYPE = 'application/json'

/** The SPEC 6 error envelope. */
export function buildErrorBody(error: GatewayError, requestId: string, totalMs: number): ErrorBody {
  const body: ErrorBody = {
    error: { code: error.code, message: error.message, requestId },
    meta: { requestId, timingMs: { total: totalMs } }
  }
  if (error.details !== undefined && error.details.length > 0) body.error.details = error.details
  if (error.migration !== undefined) body.error.migration = error.migration
  return body
}
