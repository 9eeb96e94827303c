/**
 * Conditions across one object's own keys, for the `.meta()` of a zod object whose refinement
 * checks them: config.schema.json carries them as `if`/`then` (JSON Schema 2020-12, 10.2.2).
 */

type JsonSchema = Record<string, unknown>

/**
 * `then` applies when `key` is there and one of `values`. A placeholder in `key` (`${ACTION}`)
 * is none of them, so nothing is asked of the object until the value is known.
 */
export function whenKeyIs(key: string, values: readonly string[], then: JsonSchema): JsonSchema {
  return { if: { ...present(key), properties: { [key]: { enum: [...values] } } }, then }
}

/**
 * The object has `key`, and `key` is `value` (when given). `required` names only keys the same
 * schema declares, which Ajv's strict mode asks (strictRequired): an empty schema declares one.
 */
export function present(key: string, value: JsonSchema = {}): JsonSchema {
  return { required: [key], properties: { [key]: value } }
}

/** The object has no `key`. */
export function absent(key: string): JsonSchema {
  return { not: present(key) }
}
