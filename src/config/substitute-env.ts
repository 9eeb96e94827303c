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
    if (document.includes('${')) malformedPlaceholders(document, path, problems)
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

/** `${` and a name's first character: where a placeholder was meant to start. */
const PLACEHOLDER_START = /\$\{(?=[A-Za-z_])/g
const NESTED = /\$\{[A-Za-z_]/

/**
 * SPEC 8 has `${NAME}` and `${NAME:-default}`, nothing else. A placeholder nested in a default
 * (`${A:-${B}}` ends at the first `}`: `s3cret}`, or the text `${B` when A is unset) or one never
 * closed (`${TOKEN`) would be kept as text, so an `admin.token` could become a string anyone
 * reading the file can guess: each is a problem. A `${` before anything but a name stays text.
 */
function malformedPlaceholders(text: string, path: (string | number)[], problems: EnvProblem[]): void {
  const starts = new Set<number>()
  for (const match of text.matchAll(PLACEHOLDER)) {
    starts.add(match.index)
    const fallback = match[2]
    if (fallback === undefined) continue
    if (NESTED.test(fallback)) {
      problems.push({ path, message: `placeholder \${${match[1] ?? ''}:-…} has a placeholder in its default; nested placeholders are not supported (SPEC 8: \${NAME} and \${NAME:-default})` })
    } else if (fallback.includes('{')) {
      // `${A:-{dev}}` ends at the first `}`: A's value would be followed by a stray `}`.
      problems.push({ path, message: `the default of placeholder \${${match[1] ?? ''}:-…} holds a {: a default ends at the first }, so it can hold neither` })
    }
  }
  for (const match of text.matchAll(PLACEHOLDER_START)) {
    if (starts.has(match.index)) continue
    // Inside a default: reported above as nested.
    if ([...starts].some((start) => start < match.index && text.lastIndexOf('}', match.index) < start)) continue
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(match.index + 2))?.[0] ?? ''
    problems.push({ path, message: `\${${name} starts a placeholder that is not closed; write \${${name}} or \${${name}:-default}` })
  }
}
