import { isIPv6 } from 'node:net'
import type { z } from 'zod'
import { knownKeysAt } from './known-keys.js'
import { nearestName } from './nearest-name.js'
import type { EnvProblem } from './substitute-env.js'

type Path = readonly PropertyKey[]

/**
 * The problems of a substituted and validated config, one line each, with its path (SPEC 8).
 * One problem, one message: a value whose environment variable is unset is reported as that,
 * not again as the empty string it became, and a placeholder under an unknown key is the
 * unknown key's problem.
 */
export function describeProblems(schema: z.core.$ZodType, envProblems: readonly EnvProblem[], issues: readonly z.core.$ZodIssue[]): string[] {
  const unknownKeys = issues.flatMap((issue) => (issue.code === 'unrecognized_keys' ? issue.keys.map((key) => [...issue.path, key]) : []))
  const unset = envProblems.filter((problem) => !unknownKeys.some((keyPath) => startsWith(problem.path, keyPath)))
  const problems = unset.map((problem) => `${formatPath(problem.path)}: ${problem.message}`)
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) problems.push(`${formatPath(issue.path)}: ${describeUnknownKey(schema, issue.path, key)}`)
    } else if (!unset.some((problem) => startsWith(issue.path, problem.path))) {
      problems.push(`${formatPath(issue.path)}: ${issueMessage(issue)}`)
    }
  }
  return problems
}

/** zod says only "Invalid key in record" of a key its key schema refused: the key schema's own words say why. */
function issueMessage(issue: z.core.$ZodIssue): string {
  if (issue.code !== 'invalid_key' || issue.issues.length === 0) return issue.message
  return `invalid key: ${[...new Set(issue.issues.map((inner) => inner.message))].join('; ')}`
}

function startsWith(path: Path, prefix: Path): boolean {
  return prefix.length <= path.length && prefix.every((key, index) => key === path[index])
}

function describeUnknownKey(schema: z.core.$ZodType, path: Path, key: string): string {
  const meant = nearestName(key, knownKeysAt(schema, path))
  return `Unrecognized key: "${shownKey(key)}"${meant === undefined ? '' : `; did you mean \`${meant}\`?`}`
}

function formatPath(path: Path): string {
  return path.length === 0 ? '(root)' : path.map((key) => (typeof key === 'string' ? shownKey(key) : String(key))).join('.')
}

/**
 * A key as a problem shows it. A YAML flow mapping written without the space after a colon
 * (`{ token:s3cret }`), or with another character there (`{ token=s3cret }`, `{ token :s3cret }`,
 * `{ url redis://:pw@h }`), makes one key of a name and its value, and the value may be a secret.
 * A key is shown whole only when it is a name (an RFC 9110 token: every key of the schema, a
 * tenant, a host or header name, with a port), a route label (`POST /v1/runs`) or an IPv6
 * address; any other keeps only its leading name.
 */
function shownKey(key: string): string {
  if (SHOWN_WHOLE.test(key) || ROUTE_LABEL.test(key) || isIPv6(key) || BRACKETED_IPV6.test(key)) return key
  const name = LEADING_NAME.exec(key)?.[0] ?? ''
  return key[name.length] === ':' ? `${name}:…` : `${name}…`
}

const SHOWN_WHOLE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?::\d{1,5})?$/
const ROUTE_LABEL = /^[A-Z]+ \/[^\s]*$/
const BRACKETED_IPV6 = /^\[[0-9A-Fa-f:.]+\](?::\d{1,5})?$/
const LEADING_NAME = /^[A-Za-z_][\w-]*/
