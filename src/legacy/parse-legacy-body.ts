import { z } from 'zod'
import type { LegacyAction, LegacyFields } from '../config/schema.js'
import { GatewayError, type ErrorDetail } from '../errors/registry.js'
import { encodeToken, getAtPointer, pointerTokens } from '../util/json-pointer.js'

/** A legacy call's fields, read through the tenant's `legacy.fields` pointers (SPEC 4). */
export interface LegacyCall {
  input: unknown
  policy?: string
  route?: string
  risk?: string
  state?: { policy?: string; route?: string; risk?: string }
  stateId?: string
  /** Top-level body members the gateway does not consume; carried into the V4 execution body. */
  unknown: Record<string, unknown>
}

const optionalString = z.string().optional()

const executeFieldsSchema = z.object({
  input: z.custom<unknown>((value) => value !== undefined, 'is required'),
  policy: optionalString,
  route: optionalString,
  risk: optionalString
})

const sessionExecuteFieldsSchema = executeFieldsSchema.extend({
  state: z.strictObject({ policy: optionalString, route: optionalString, risk: optionalString }).optional(),
  stateId: z.string().min(1).max(256).optional()
})

const EXECUTE_FIELDS = ['input', 'policy', 'route', 'risk'] as const
const SESSION_EXECUTE_FIELDS = [...EXECUTE_FIELDS, 'state', 'stateId'] as const

/** `application/json` or `application/*+json`, any parameters (RFC 9110 8.3.1: case-insensitive). */
export function isJsonContentType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false
  const type = (contentType.split(';', 1)[0] as string).trim().toLowerCase()
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}

export function parseJsonObject(bytes: Buffer): Record<string, unknown> {
  let document: unknown
  try {
    document = JSON.parse(bytes.toString('utf8'))
  } catch {
    throw new GatewayError('INVALID_REQUEST', 'request body is not valid JSON', { details: [{ pointer: '', message: 'not valid JSON' }] })
  }
  if (document === null || typeof document !== 'object' || Array.isArray(document)) {
    throw new GatewayError('INVALID_REQUEST', 'request body must be a JSON object', { details: [{ pointer: '', message: 'expected a JSON object' }] })
  }
  return document as Record<string, unknown>
}

/**
 * Validates a legacy body and reads its fields. `state` and `stateId` are consumed on
 * session-execute routes only; on execute routes they are ordinary unknown fields.
 * `extraConsumedPointer` is a `body:` state key, which the gateway consumes too.
 */
export function parseLegacyCall(
  body: Record<string, unknown>,
  action: Exclude<LegacyAction, 'proxy'>,
  fields: LegacyFields,
  unknownFields: 'keep' | 'drop',
  extraConsumedPointer?: string
): LegacyCall {
  const names = action === 'execute' ? EXECUTE_FIELDS : SESSION_EXECUTE_FIELDS
  const raw: Record<string, unknown> = {}
  for (const name of names) raw[name] = getAtPointer(body, fields[name])
  const schema = action === 'execute' ? executeFieldsSchema : sessionExecuteFieldsSchema
  const result = schema.safeParse(raw)
  if (!result.success) {
    const details: ErrorDetail[] = result.error.issues.map((issue) => {
      const [field, ...rest] = issue.path
      const base = fields[field as (typeof names)[number]] ?? ''
      return { pointer: base + rest.map((token) => `/${encodeToken(String(token))}`).join(''), message: issue.message }
    })
    throw new GatewayError('INVALID_REQUEST', `invalid legacy request body: ${details.map((detail) => `${detail.pointer} ${detail.message}`).join('; ')}`, { details })
  }
  const consumed = new Set(names.map((name) => pointerTokens(fields[name])[0]))
  if (extraConsumedPointer !== undefined) consumed.add(pointerTokens(extraConsumedPointer)[0])
  const call = result.data as LegacyCall
  call.unknown = unknownFields === 'drop' ? {} : Object.fromEntries(Object.entries(body).filter(([key]) => !consumed.has(key)))
  return call
}
