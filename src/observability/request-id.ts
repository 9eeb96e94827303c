import { randomUUID } from 'node:crypto'

// SPEC 6: at most 128 chars of [A-Za-z0-9._:-]; anything else is replaced, never echoed.
const VALID_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

export function resolveRequestId(incoming: string | string[] | undefined): string {
  return typeof incoming === 'string' && VALID_REQUEST_ID.test(incoming) ? incoming : randomUUID()
}
