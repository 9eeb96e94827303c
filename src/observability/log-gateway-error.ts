import type { Logger } from 'pino'
import type { GatewayError } from '../errors/registry.js'

/** Answers that are the gateway working as designed, not failing: the access log records them. */
const DELIBERATE_5XX = new Set(['OVERLOADED', 'SHUTTING_DOWN'])

/**
 * An upstream that failed is not the gateway failing: SPEC 17 has the request's access line
 * name it (its `error`), with no other line and no stack trace, except at debug.
 */
const UPSTREAM_FAILURES: ReadonlySet<string> = new Set(['UPSTREAM_UNAVAILABLE', 'UPSTREAM_TIMEOUT', 'UPSTREAM_BAD_RESPONSE'])

/** Whether an error code is an upstream's failure, which the request's access line names rather than a line of its own. */
export function isUpstreamFailure(code: string): boolean {
  return UPSTREAM_FAILURES.has(code)
}

/**
 * The request a line is about, as its access line names it: its id, its trace, and with tracing
 * on its SERVER span (SPEC 17: logs and traces join on `traceId` and `spanId`).
 */
export interface RequestLogIds {
  readonly requestId: string
  readonly traceId?: string | undefined
  readonly spanId?: string | undefined
}

/** Logs gateway-side failures; a client that broke off or went away is not one, whatever the error it left. */
export function logGatewayError(log: Pick<Logger, 'debug' | 'info' | 'error'>, error: GatewayError, clientGone: boolean, request?: RequestLogIds): void {
  if (error.statusCode < 500 || DELIBERATE_5XX.has(error.code)) return
  if (clientGone) log.info({ ...request, error: error.code }, 'client went away before its answer')
  else if (isUpstreamFailure(error.code)) log.debug({ ...request, err: error }, 'upstream failure')
  else log.error({ ...request, err: error }, 'gateway error')
}
