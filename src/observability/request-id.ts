import { randomUUID } from 'node:crypto'

// SPEC 6: at most 128 chars of [A-Za-z0-9._:-]; anything else is replaced, never echoed.
const VALID_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** Whether an incoming `x-request-id` is kept as it came (SPEC 6). */
export function isValidRequestId(incoming: string | string[] | undefined): incoming is string {
  return typeof incoming === 'string' && VALID_REQUEST_ID.test(incoming)
}

export function resolveRequestId(incoming: string | string[] | undefined): string {
  return isValidRequestId(incoming) ? incoming : randomUUID()
}
