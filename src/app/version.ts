import { readFileSync } from 'node:fs'

/**
 * The gateway's version, from its package.json (two folders up from src/app/ and dist/app/), or
 * "unknown" for a build copied away from it (the bench's saved base build): v4gw_build_info
 * should not keep a gateway from starting.
 */
export function gatewayVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version
  } catch {
    return 'unknown'
  }
}
