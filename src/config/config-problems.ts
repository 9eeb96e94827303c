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
      problems.push(`${formatPath(issue.path)}: ${issue.message}`)
    }
  }
  return problems
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
 * (`{ token:s3cret }`) makes one key of a name and its value, and the value may be a secret:
 * such a key keeps only the name.
 */
function shownKey(key: string): string {
  const glued = /^([A-Za-z_][\w-]*):\S/.exec(key)
  // A bare IPv6 address (a tenancy.hosts key) is not one: its problem says how to write it.
  return glued === null || isIPv6(key) ? key : `${glued[1]}:…`
}
