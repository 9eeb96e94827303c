import type { z } from 'zod'
import type { ErrorDetail } from '../errors/registry.js'
import { encodeToken } from '../util/json-pointer.js'

/**
 * An admin body's problems, each at its RFC 6901 pointer (SPEC 14 "bad body 400 with pointers"):
 * `""` for the body as a whole, and each unknown member at its own (`/rollback`), where zod
 * names them together on their object.
 */
export function bodyProblems(error: z.ZodError): ErrorDetail[] {
  return error.issues.flatMap((issue) => {
    const pointer = issue.path.map((token) => `/${encodeToken(String(token))}`).join('')
    if (issue.code === 'unrecognized_keys') return issue.keys.map((key) => ({ pointer: `${pointer}/${encodeToken(key)}`, message: 'unknown member' }))
    return [{ pointer, message: issue.message }]
  })
}
