/**
 * `${NAME}` and `${NAME:-default}` (SPEC 8), as a pattern source: config.schema.json accepts a
 * value that holds one, and the YAML reader finds one left unquoted in a flow collection.
 */
export const PLACEHOLDER_PATTERN = '\\$\\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\\}'
const PLACEHOLDER = new RegExp(PLACEHOLDER_PATTERN, 'g')

export interface EnvProblem {
  path: (string | number)[]
  message: string
}

/**
 * Replaces placeholders in every string value of a parsed document. Substituting after
 * parsing (not in the raw text) means an environment value can never change the document's
 * structure, e.g. inject YAML keys.
 */
export function substituteEnv(document: unknown, env: Record<string, string | undefined>, problems: EnvProblem[], path: (string | number)[] = []): unknown {
  if (typeof document === 'string') {
    return document.replace(PLACEHOLDER, (_match, name: string, fallback: string | undefined) => {
      const value = env[name]
      if (value !== undefined && value !== '') return value
      if (fallback !== undefined) return fallback
      problems.push({ path, message: `environment variable ${name} is not set (write \${${name}:-default} to allow that)` })
      return ''
    })
  }
  if (Array.isArray(document)) return document.map((item, index) => substituteEnv(item, env, problems, [...path, index]))
  if (document !== null && typeof document === 'object') {
    return Object.fromEntries(Object.entries(document).map(([key, value]) => [key, substituteEnv(value, env, problems, [...path, key])]))
  }
  return document
}
