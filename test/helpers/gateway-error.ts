import { expect } from 'vitest'
import type { Answer } from './http.js'

export interface ErrorDetail {
  pointer: string
  message: string
}

/**
 * Asserts the whole SPEC 6 envelope of an error the gateway made: status, `application/json`,
 * `error.{code,message,requestId,details?}`, `meta.{requestId,timingMs.total}` and nothing else,
 * and `x-request-id` equal to `error.requestId`. `extra` names members of `error` beyond those
 * (a brownout's `migration`). Returns the details (empty when there are none).
 */
export function expectGatewayError(answer: Answer, status: number, code: string, extra: readonly string[] = []): ErrorDetail[] {
  expect({ status: answer.status, code: answer.json?.error?.code }).toEqual({ status, code })
  // SPEC 6: content-type `application/json`, as written (RFC 8259 defines no charset for it).
  expect(answer.headers['content-type']).toBe('application/json')
  const requestId = answer.headers['x-request-id']
  expect(typeof requestId).toBe('string')
  expect(Object.keys(answer.json).sort()).toEqual(['error', 'meta'])
  const { details, ...error } = answer.json.error as { details?: ErrorDetail[] } & Record<string, unknown>
  for (const member of extra) delete error[member]
  expect(error).toEqual({ code, message: expect.stringMatching(/\S/), requestId })
  expect(answer.json.meta).toEqual({ requestId, timingMs: { total: expect.any(Number) } })
  if (details === undefined) return []
  expect(details.length).toBeGreaterThan(0)
  for (const detail of details) expect(detail).toEqual({ pointer: expect.any(String), message: expect.any(String) })
  return details
}
