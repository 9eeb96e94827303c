export const DEFAULT_CONFIG_PATH = 'config/gateway.yaml'

/**
 * `--config`, then `V4GW_CONFIG`, then `config/gateway.yaml` (SPEC 8). config/ is what reads the
 * environment. A module of its own so that `v4gw healthcheck` finds the file without loading
 * the schema.
 */
export function resolveConfigPath(flag: string | undefined, env: Record<string, string | undefined> = process.env): string {
  return flag ?? (env.V4GW_CONFIG !== undefined && env.V4GW_CONFIG !== '' ? env.V4GW_CONFIG : DEFAULT_CONFIG_PATH)
}
