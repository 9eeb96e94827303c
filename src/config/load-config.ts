import { readFile } from 'node:fs/promises'
import { extname } from 'node:path'
import { parse as parseYaml } from 'yaml'
import { configSchema, type GatewayConfig } from './schema.js'
import { deepFreeze } from '../util/deep-freeze.js'
import { substituteEnv, type EnvProblem } from './substitute-env.js'

export const DEFAULT_CONFIG_PATH = 'config/gateway.yaml'

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

/** `--config`, then `V4GW_CONFIG`, then `config/gateway.yaml` (SPEC 8). */
export function resolveConfigPath(flag: string | undefined, env: Record<string, string | undefined>): string {
  return flag ?? (env.V4GW_CONFIG !== undefined && env.V4GW_CONFIG !== '' ? env.V4GW_CONFIG : DEFAULT_CONFIG_PATH)
}

function formatPath(path: readonly PropertyKey[]): string {
  return path.length === 0 ? '(root)' : path.map(String).join('.')
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
  let document: unknown
  try {
    document = extname(source) === '.json' ? JSON.parse(text) : parseYaml(text, { prettyErrors: true, uniqueKeys: true })
  } catch (error) {
    throw new ConfigError(source, [`cannot parse the file: ${(error as Error).message.split('\n')[0]}`])
  }
  const envProblems: EnvProblem[] = []
  const substituted = substituteEnv(document ?? {}, env, envProblems)
  const result = configSchema.safeParse(substituted)
  const problems = envProblems.map((problem) => `${formatPath(problem.path)}: ${problem.message}`)
  if (!result.success) {
    for (const issue of result.error.issues) problems.push(`${formatPath(issue.path)}: ${issue.message}`)
  }
  if (problems.length > 0 || !result.success) throw new ConfigError(source, problems)
  return deepFreeze(result.data)
}
