/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/, 3.2): the trace id of an incoming
 * `traceparent`, for the access line (SPEC 17). The gateway does not take part in the trace; it
 * only reads the id. Never reads `tracestate` or `baggage`, which may carry anything.
 */

// version "-" trace-id "-" parent-id "-" trace-flags, lowercase hex only (W3C 3.2.2).
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}(-.*)?$/
const ZERO_TRACE_ID = '0'.repeat(32)
const ZERO_PARENT_ID = '0'.repeat(16)

/**
 * The 32-hex trace id of a valid `traceparent`, else undefined. Version 00 is exactly its 55
 * characters; `ff` is invalid; a later version is read by its 00 prefix and may only go on after
 * a `-` (W3C 3.2.4). An all-zero trace id or parent id is invalid. Two `traceparent` fields,
 * which Node joins with ", ", are invalid too.
 */
export function traceIdOf(traceparent: string | readonly string[] | undefined): string | undefined {
  if (typeof traceparent !== 'string' || traceparent.length < 55) return undefined
  const match = TRACEPARENT.exec(traceparent)
  if (match === null) return undefined
  const [, version, traceId, parentId, rest] = match as unknown as [string, string, string, string, string | undefined]
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined
  if (traceId === ZERO_TRACE_ID || parentId === ZERO_PARENT_ID) return undefined
  return traceId
}
