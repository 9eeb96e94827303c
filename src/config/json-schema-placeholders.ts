import { wholeNumberPattern } from './json-schema-patterns.js'
import { PLACEHOLDER_PATTERN } from './substitute-env.js'
import { isPlainObject } from '../util/is-plain-object.js'

type JsonSchema = Record<string, unknown>

/** A string holding a `${…}` placeholder: what it becomes is known only where the gateway starts. */
const HOLDS_PLACEHOLDER: JsonSchema = { type: 'string', pattern: PLACEHOLDER_PATTERN }

/** Keywords that describe a value rather than check it; they stay on the outer schema. */
const ANNOTATIONS = ['default', 'title', 'description', 'examples'] as const

/** The shortest placeholder, `${A}`: a string schema asking for no more than this holds any. */
const SHORTEST_PLACEHOLDER = 4

/**
 * The file as written, before substitution (SPEC 8): the gateway substitutes `${NAME}` and
 * `${NAME:-default}` in every string value and then reads the result, so wherever a value is a
 * scalar, a string holding a placeholder is accepted, and a number or a boolean may be its text
 * ("8080", "false"), as substitution leaves it. Keys are never substituted, so `propertyNames`
 * stay as they are, and so do the conditions of `if`, which a placeholder must not satisfy.
 */
export function acceptPlaceholders(node: JsonSchema): JsonSchema {
  const result: JsonSchema = { ...node }
  if (isPlainObject(node.properties)) {
    result.properties = Object.fromEntries(Object.entries(node.properties).map(([key, child]) => [key, isPlainObject(child) ? acceptPlaceholders(child) : child]))
  }
  for (const key of ['additionalProperties', 'items'] as const) {
    const child = node[key]
    if (isPlainObject(child)) result[key] = acceptPlaceholders(child)
  }
  if (Array.isArray(node.anyOf)) {
    result.anyOf = withOnePlaceholderBranch(node.anyOf.flatMap((child: unknown) => (isPlainObject(child) ? branchesOf(acceptPlaceholders(withoutDefault(child))) : [child])))
    return result
  }
  // `type: ["boolean", "null"]` (zod writes a nullable scalar so): each type as it may be written.
  if (Array.isArray(node.type)) {
    const { type: types, ...rest } = result
    const annotations = Object.fromEntries(Object.entries(rest).filter(([key]) => (ANNOTATIONS as readonly string[]).includes(key)))
    const checks = Object.fromEntries(Object.entries(rest).filter(([key]) => !(ANNOTATIONS as readonly string[]).includes(key)))
    return { ...annotations, anyOf: withOnePlaceholderBranch((types as unknown[]).flatMap((type) => branchesOf(asWritten({ ...checks, type })))) }
  }
  return asWritten(result)
}

/** A branch of a union: its default, which zod repeats there, is the union's. */
function withoutDefault(branch: JsonSchema): JsonSchema {
  const { default: _default, ...rest } = branch
  return rest
}

/** A union's branches, a nested union's flattened into it. */
function branchesOf(node: JsonSchema): unknown[] {
  const { anyOf, ...rest } = node
  const onlyAnnotations = Object.keys(rest).every((key) => (ANNOTATIONS as readonly string[]).includes(key))
  return Array.isArray(anyOf) && onlyAnnotations ? anyOf : [node]
}

function withOnePlaceholderBranch(branches: unknown[]): unknown[] {
  const others = branches.filter((branch) => !isHoldsPlaceholder(branch))
  return others.length === branches.length ? others : [...others, HOLDS_PLACEHOLDER]
}

function isHoldsPlaceholder(branch: unknown): boolean {
  return isPlainObject(branch) && branch.type === HOLDS_PLACEHOLDER.type && branch.pattern === HOLDS_PLACEHOLDER.pattern && Object.keys(branch).length === 2
}

/** A scalar as it may be written: itself, its text (numbers, booleans), or a placeholder. */
function asWritten(node: JsonSchema): JsonSchema {
  switch (node.type) {
    case 'integer':
      return union(node, [{ type: 'string', pattern: wholeNumberPattern(lowestOf(node), highestOf(node)) }])
    case 'boolean':
      return union(node, [{ type: 'string', enum: ['true', 'false'] }])
    case 'string':
      return mayRefuseAPlaceholder(node) ? union(node, []) : node
    default:
      return 'const' in node || 'enum' in node ? union(node, []) : node
  }
}

function mayRefuseAPlaceholder(node: JsonSchema): boolean {
  return ['pattern', 'format', 'enum', 'const', 'maxLength'].some((key) => key in node) || (typeof node.minLength === 'number' && node.minLength > SHORTEST_PLACEHOLDER)
}

function union(node: JsonSchema, asText: JsonSchema[]): JsonSchema {
  const annotations: JsonSchema = {}
  const check: JsonSchema = {}
  for (const [key, value] of Object.entries(node)) ((ANNOTATIONS as readonly string[]).includes(key) ? annotations : check)[key] = value
  return { ...annotations, anyOf: [check, ...asText, HOLDS_PLACEHOLDER] }
}

function lowestOf(node: JsonSchema): number {
  if (typeof node.minimum === 'number') return Math.ceil(node.minimum)
  if (typeof node.exclusiveMinimum === 'number') return Math.floor(node.exclusiveMinimum) + 1
  return 0
}

function highestOf(node: JsonSchema): number {
  if (typeof node.maximum === 'number') return Math.floor(node.maximum)
  if (typeof node.exclusiveMaximum === 'number') return Math.ceil(node.exclusiveMaximum) - 1
  return Number.MAX_SAFE_INTEGER
}
