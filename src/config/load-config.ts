import { readFile } from 'node:fs/promises'
import { extname } from 'node:path'
import { parseDocument, type Document, type YAMLError } from 'yaml'
import { describeProblems } from './config-problems.js'
import { configSchema, type GatewayConfig } from './schema.js'
import { deepFreeze } from '../util/deep-freeze.js'
import { substituteEnv, type EnvProblem } from './substitute-env.js'
import { blankUnquotedPlaceholders, QUOTE_THIS_VALUE } from './unquoted-placeholders.js'

export { DEFAULT_CONFIG_PATH, resolveConfigPath } from './config-path.js'

/** Every problem of a config file, each with its path; thrown by `loadConfig`. */
export class ConfigError extends Error {
  readonly code = 'CONFIG_INVALID'
  readonly problems: string[]

  constructor(source: string, problems: string[]) {
    super(`invalid config ${source}:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`)
    this.name = 'ConfigError'
    this.problems = problems
  }
}

/** The one visible pipeline: read, parse, substitute env, validate, freeze. */
export async function loadConfig(path: string, env: Record<string, string | undefined> = process.env): Promise<GatewayConfig> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    throw new ConfigError(path, [`cannot read the file: ${(error as NodeJS.ErrnoException).code ?? String(error)}`])
  }
  return parseConfigText(text, path, env)
}

export function parseConfigText(text: string, source: string, env: Record<string, string | undefined>): GatewayConfig {
  const document = extname(source) === '.json' ? parseJson(text, source) : parseYaml(text, source)
  if (depthOver(document, MAX_DEPTH)) throw new ConfigError(source, [`cannot parse the file: it nests mappings and lists deeper than ${MAX_DEPTH} levels`])
  const envProblems: EnvProblem[] = []
  const substituted = substituteEnv(document ?? {}, env, envProblems)
  const result = configSchema.safeParse(substituted)
  if (envProblems.length > 0 || !result.success) throw new ConfigError(source, describeProblems(configSchema, envProblems, result.error?.issues ?? []))
  return deepFreeze(result.data)
}

/**
 * The deepest a config's values nest: SPEC 8's deepest key is about ten levels down. The walks
 * after parsing (placeholders, the schema, freezing) recurse, and JSON.parse takes any depth: a
 * file of 100,000 `[` would end them in a RangeError, a stack trace instead of a problem.
 */
const MAX_DEPTH = 64

/** Whether `document` holds an object or array more than `limit` levels down; a loop, so it cannot overflow itself. */
function depthOver(document: unknown, limit: number): boolean {
  const pending: [unknown, number][] = [[document, 0]]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [value, depth] = next
    if (value === null || typeof value !== 'object') continue
    if (depth >= limit) return true
    for (const child of Object.values(value)) pending.push([child, depth + 1])
  }
  return false
}

/*
 * A parse error says what and where, never the file's text: a config may hold a secret written
 * in it (an admin token, a Redis password), and the error goes to the log. V8 quotes up to ten
 * characters around a JSON error; yaml quotes tags, aliases and the lines around an error.
 */

/** Where V8 says a JSON error is, when it says. */
const JSON_ERROR_POSITION = / in JSON at position (\d+)/

function parseJson(text: string, source: string): unknown {
  let document: unknown
  try {
    document = JSON.parse(text)
  } catch (error) {
    const message = (error as Error).message
    const at = JSON_ERROR_POSITION.exec(message)
    if (at !== null) throw new ConfigError(source, [`cannot parse the file: ${message.slice(0, at.index)}${whereInText(text, Number(at[1]))}`])
    // "Unexpected token 'k', "{"token":key_…"... is not valid JSON": the token and the excerpt are the file's.
    if (message.startsWith('Unexpected token')) throw new ConfigError(source, [`cannot parse the file: Unexpected token${whereInText(text, unexpectedTokenPosition(text))}`])
    throw new ConfigError(source, [`cannot parse the file: ${message.replace(/, ".*$/s, '')}`])
  }
  // JSON.parse keeps the last of two equal keys without a word; a YAML file is refused for one
  // (uniqueKeys), so a JSON file is too. JSON is YAML, so yaml's parser finds them with their place.
  const duplicates = parseDocument(text, { uniqueKeys: true, logLevel: 'silent' }).errors.filter((error) => error.code === 'DUPLICATE_KEY')
  if (duplicates.length > 0) throw new ConfigError(source, duplicates.map((error) => `cannot parse the file: ${describeYamlError(error)}`))
  return document
}

function parseYamlDocument(text: string): Document.Parsed {
  // logLevel silent: yaml would otherwise print its warnings, with the offending line, to stderr.
  // merge: YAML 1.2 dropped `<<` merge keys, but a file of many tenants shares their settings so
  // (`beta: { <<: *acme, … }`), as Kubernetes and Compose files do.
  return parseDocument(text, { prettyErrors: true, uniqueKeys: true, logLevel: 'silent', merge: true })
}

function parseYaml(text: string, source: string): unknown {
  const { text: readable, placeholders } = blankUnquotedPlaceholders(text, (blanked) => parseYamlDocument(blanked).errors)
  const document = parseYamlDocument(readable)
  // A warning (an unknown tag such as `!secret`) is a problem too: the value would not be what was meant.
  const problems = [
    ...placeholders.map((offset) => `cannot parse the file: ${QUOTE_THIS_VALUE}${whereInText(text, offset)}`),
    ...[...document.errors, ...document.warnings].map((error) => `cannot parse the file: ${describeYamlError(error)}`)
  ]
  if (problems.length > 0) throw new ConfigError(source, problems)
  try {
    return document.toJS()
  } catch (error) {
    // An alias with no anchor before it; yaml names the alias after a colon.
    throw new ConfigError(source, [`cannot parse the file: ${(error as Error).message.split(':')[0]}`])
  }
}

function describeYamlError(error: YAMLError): string {
  // The first line, without its " at line L, column C:", anything yaml quotes after a colon, and
  // a fragment it quotes inline (`Invalid escape sequence \q`, `Unknown directive %FOO`).
  const what = ((error.message.split('\n')[0] as string).replace(/ at line \d+, column \d+:?$/, '').split(': ')[0] as string).replace(/ \S*[\\%]\S*/g, '')
  const start = error.linePos?.[0]
  return start === undefined ? what : `${what} at line ${start.line}, column ${start.col}`
}

/**
 * Where V8's "Unexpected token" is, which it does not say: the shortest prefix of the text that
 * fails otherwise than by ending early ends with that token (a config file is a few KiB, so a
 * binary search of parses is cheap).
 */
function unexpectedTokenPosition(text: string): number {
  let endsEarly = 0
  let failsHere = text.length
  while (failsHere - endsEarly > 1) {
    const middle = (endsEarly + failsHere) >>> 1
    if (failsByEndingEarly(text.slice(0, middle))) endsEarly = middle
    else failsHere = middle
  }
  return failsHere - 1
}

function failsByEndingEarly(prefix: string): boolean {
  try {
    JSON.parse(prefix)
    return true
  } catch (error) {
    const message = (error as Error).message
    const at = JSON_ERROR_POSITION.exec(message)
    return message.startsWith('Unexpected end of JSON input') || (at !== null && Number(at[1]) >= prefix.length)
  }
}

function whereInText(text: string, position: number): string {
  const before = text.slice(0, position)
  const line = before.split('\n').length
  return ` at line ${line}, column ${position - before.lastIndexOf('\n')}`
}
