import { z } from 'zod'
import { acceptPlaceholders } from './json-schema-placeholders.js'
import { configSchema, EMBEDDED_UPSTREAM } from './schema.js'
import { isPlainObject } from '../util/is-plain-object.js'

type JsonSchema = Record<string, unknown>

/** The config's defaults, read off the schema itself so they are never written twice. */
function schemaDefaults(): Record<string, unknown> {
  const { tenants: _tenants, ...defaults } = configSchema.parse({ tenants: { example: { upstream: { staging: EMBEDDED_UPSTREAM } } } })
  return defaults
}

/** Adds the defaults zod could not express (those of preprocessed numbers and booleans). */
function withDefaults(node: JsonSchema, defaults: unknown): JsonSchema {
  const properties = node.properties
  if (isPlainObject(properties)) {
    for (const [key, child] of Object.entries(properties)) {
      if (isPlainObject(child)) properties[key] = withDefaults(child, isPlainObject(defaults) ? defaults[key] : undefined)
    }
  }
  for (const key of ['additionalProperties', 'items'] as const) {
    const child = node[key]
    if (isPlainObject(child)) node[key] = withDefaults(child, undefined)
  }
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    const children = node[key]
    if (Array.isArray(children)) node[key] = children.map((child: unknown) => (isPlainObject(child) ? withDefaults(child, defaults) : child))
  }
  return defaults !== undefined && !('default' in node) && !isPlainObject(defaults) ? { ...node, default: defaults } : node
}

/**
 * Drops every `format`. In 2020-12 a format is an annotation that a validator need not check
 * (JSON Schema Validation 7.2), and one Ajv does not know fails its strict mode: zod writes
 * `starts_with`, and even `uri` and `date-time` need a plugin there. So the checks are patterns,
 * which every validator runs alike; a format that comes without one is a check that would be
 * lost, and fails the build of the schema instead.
 */
function withoutFormats(node: unknown, at = '#'): unknown {
  if (Array.isArray(node)) return node.map((child, index) => withoutFormats(child, `${at}/${index}`))
  if (!isPlainObject(node)) return node
  const { format, ...rest } = node
  if (typeof format === 'string' && typeof rest.pattern !== 'string') {
    throw new Error(`config schema: format "${format}" at ${at} has no pattern to check it; give the zod schema a pattern (.meta({ pattern }))`)
  }
  const kept = typeof format === 'string' ? rest : node
  return Object.fromEntries(Object.entries(kept).map(([key, child]) => [key, withoutFormats(child, `${at}/${key}`)]))
}

/** JSON Schema of the config file, generated from the zod schema, for editors and CI that validate YAML. */
export function buildConfigJsonSchema(): JsonSchema {
  const generated = z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchema
  const checked = withoutFormats(withDefaults(generated, schemaDefaults())) as JsonSchema
  return {
    ...acceptPlaceholders(checked),
    $id: 'https://v4-migration-gateway.invalid/config.schema.json',
    title: 'v4-migration-gateway config',
    description: 'Generated from src/config/schema.ts by `npm run config-schema`; see docs/config.md.'
  }
}
