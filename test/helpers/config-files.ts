import { expect } from 'vitest'
import { ConfigError, loadConfig } from '../../src/config/load-config.js'

/** The least a config file needs (SPEC 8): one tenant with one upstream. */
export const MINIMAL_YAML = `
tenants:
  acme:
    upstream:
      staging: http://127.0.0.1:4010
`

/** Runs `loadConfig` on `path` and returns the ConfigError it rejects with; fails the test if it loads. */
export async function configError(path: string, env: Record<string, string | undefined> = {}): Promise<ConfigError> {
  const error: unknown = await loadConfig(path, env).then(
    () => undefined,
    (rejection: unknown) => rejection
  )
  expect(error).toBeInstanceOf(ConfigError)
  return error as ConfigError
}

/** The `problems` of the CONFIG_INVALID error that loading `path` rejects with. */
export async function configProblems(path: string, env: Record<string, string | undefined> = {}): Promise<string[]> {
  const error = await configError(path, env)
  expect(error.code).toBe('CONFIG_INVALID')
  return error.problems
}
