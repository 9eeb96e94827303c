import { readFileSync } from 'node:fs'

/** The gateway's version, from its package.json (two folders up from src/app/ and dist/app/). */
export function gatewayVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version
}
