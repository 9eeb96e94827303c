import { readFileSync } from 'node:fs'

/**
 * SPEC 12: the admin token of `v4gw report` and `v4gw sunset-check` comes from `--token-file FILE`
 * (its first line, trailing whitespace removed) or `V4GW_ADMIN_TOKEN`, never from an argument,
 * which shell history and process lists would keep. undefined when neither is given (an admin
 * listener without a token answers loopback peers).
 */
export function resolveAdminToken(tokenFile: string | undefined, env: Record<string, string | undefined> = process.env): string | undefined {
  if (tokenFile !== undefined) {
    const token = readFileSync(tokenFile, 'utf8').split(/\r?\n/, 1)[0]?.trim() ?? ''
    if (token === '') throw new Error(`--token-file ${tokenFile} holds no token on its first line`)
    return token
  }
  const fromEnv = env.V4GW_ADMIN_TOKEN
  return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv
}
