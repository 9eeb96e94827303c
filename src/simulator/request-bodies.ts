import { SimulatorError } from './errors.js'
import type { GovernanceDefaults } from './types.js'

export interface ExecutionBody extends GovernanceDefaults {
  input: unknown
}

const GOVERNANCE_FIELDS = ['policy', 'route', 'risk'] as const

function isJsonObject (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function requireObject (body: unknown): Record<string, unknown> {
  if (!isJsonObject(body)) throw new SimulatorError('INVALID_REQUEST', 'request body must be a JSON object')
  return body
}

/** Only the governance fields that were given, each checked to be a string. */
function pickGovernance (body: Record<string, unknown>): GovernanceDefaults {
  const picked: GovernanceDefaults = {}
  for (const field of GOVERNANCE_FIELDS) {
    const value = body[field]
    if (value === undefined) continue
    if (typeof value !== 'string') throw new SimulatorError('INVALID_REQUEST', `${field} must be a string`)
    picked[field] = value
  }
  return picked
}

/** `{ policy?, route?, risk? }`; a missing or empty body means no defaults. Other fields are ignored. */
export function parseSessionStartBody (body: unknown): GovernanceDefaults {
  if (body === undefined) return {}
  return pickGovernance(requireObject(body))
}

/** `{ input, policy?, route?, risk? }`; `input` may be any JSON value, null included. Other fields are ignored. */
export function parseExecutionBody (body: unknown): ExecutionBody {
  if (body === undefined) throw new SimulatorError('INVALID_REQUEST', 'input is required')
  const object = requireObject(body)
  if (!('input' in object)) throw new SimulatorError('INVALID_REQUEST', 'input is required')
  return { input: object.input, ...pickGovernance(object) }
}

export interface PolicyBody {
  name: string
  fields: Record<string, unknown>
}

export function parsePolicyBody (body: unknown): PolicyBody {
  const object = requireObject(body)
  const { name, ...fields } = object
  if (typeof name !== 'string' || name === '') {
    throw new SimulatorError('INVALID_REQUEST', 'name must be a non-empty string')
  }
  return { name, fields }
}

export function parseRevokeKeyBody (body: unknown): string {
  const { key } = requireObject(body)
  if (typeof key !== 'string' || key === '') throw new SimulatorError('INVALID_REQUEST', 'key must be a non-empty string')
  return key
}
