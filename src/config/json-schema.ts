import { z } from 'zod'
import { configSchema, EMBEDDED_UPSTREAM } from './schema.js'
import { isPlainObject } from '../util/is-plain-object.js'

type JsonSchema = Record<string, unknown>

// What `${NAME}` / `${NAME:-default}` looks like before substitution, and a whole-number string.
const PLACEHOLDER_OR_WHOLE_NUMBER = '^(\\d+|\\$\\{[A-Za-z_][A-Za-z0-9_]*(:-[^}]*)?\\})$'

/** The config's defaults, read off the schema itself so they are never written twice. */
function schemaDefaults(): Record<string, unknown> {
  const { tenants: _tenants, ...defaults } = configSchema.parse({ tenants: { example: { upstream: { staging: EMBEDDED_UPSTREAM } } } })
  return defaults
}

/** Adds defaults zod could not express (preprocessed numbers) and lets numbers be placeholders. */
function decorate(node: JsonSchema, defaults: unknown): JsonSchema {
  const properties = node.properties
  if (isPlainObject(properties)) {
    for (const [key, child] of Object.entries(properties)) {
      if (isPlainObject(child)) properties[key] = decorate(child, isPlainObject(defaults) ? defaults[key] : undefined)
    }
  }
  for (const key of ['additionalProperties', 'items'] as const) {
    const child = node[key]
    if (isPlainObject(child)) node[key] = decorate(child, undefined)
  }
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    const children = node[key]
    if (Array.isArray(children)) node[key] = children.map((child: unknown) => (isPlainObject(child) ? decorate(child, defaults) : child))
  }
  const withDefault = defaults !== undefined && !('default' in node) && !isPlainObject(defaults) ? { ...node, default: defaults } : node
  if (withDefault.type === 'integer') {
    const { default: defaultValue, ...integer } = withDefault
    return { ...(defaultValue === undefined ? {} : { default: defaultValue }), anyOf: [integer, { type: 'string', pattern: PLACEHOLDER_OR_WHOLE_NUMBER }] }
  }
  return withDefault
}

/** JSON Schema of the config file, generated from the zod schema, for editors that validate YAML. */
export function buildConfigJsonSchema(): JsonSchema {
  const generated = z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchema
  return {
    ...decorate(generated, schemaDefaults()),
    $id: 'https://v4-migration-gateway.invalid/config.schema.json',
    title: 'v4-migration-gateway config',
    description: 'Generated from src/config/schema.ts by `npm run config-schema`; see docs/config.md.'
  }
}
