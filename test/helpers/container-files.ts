import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { ROOT } from './spawn-cli.js'

/**
 * The Dockerfile and docker-compose.yml read as a container engine reads them, enough to run
 * their commands here: no engine runs in the tests, so the image's HEALTHCHECK and entrypoint
 * and the compose probes run as processes in the checkout, with the image's environment.
 */

/** Instructions with their `\` continuations joined, comments dropped. */
function dockerfileInstructions(): string[] {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
}

/** Each build stage of the Dockerfile: its `AS` name (if any) and its instructions, FROM first. */
export function dockerStages(): { name: string | undefined; instructions: string[] }[] {
  const stages: { name: string | undefined; instructions: string[] }[] = []
  for (const instruction of dockerfileInstructions()) {
    if (instruction.startsWith('FROM ')) stages.push({ name: / AS (\S+)$/i.exec(instruction)?.[1], instructions: [] })
    stages.at(-1)?.instructions.push(instruction)
  }
  return stages
}

/** The final stage: the instructions after the last FROM. */
function finalStage(): string[] {
  const instructions = dockerfileInstructions()
  const lastFrom = instructions.map((line) => line.startsWith('FROM ')).lastIndexOf(true)
  return instructions.slice(lastFrom)
}

/** The final stage's `ENV` as a map, values as written (`KEY=VALUE`, no quoting used there). */
export function imageEnv(): Record<string, string> {
  const env: Record<string, string> = {}
  for (const line of finalStage().filter((instruction) => instruction.startsWith('ENV '))) {
    for (const pair of line.slice('ENV '.length).trim().split(/\s+/)) {
      const equals = pair.indexOf('=')
      if (equals <= 0) throw new Error(`ENV pair "${pair}" is not KEY=VALUE`)
      env[pair.slice(0, equals)] = pair.slice(equals + 1)
    }
  }
  return env
}

/** The image's environment with paths under its WORKDIR (/app) moved to this checkout. */
export function imageEnvInCheckout(): Record<string, string> {
  const workdir = /^WORKDIR (\S+)$/m.exec(finalStage().join('\n'))?.[1] ?? '/app'
  return Object.fromEntries(Object.entries(imageEnv()).map(([name, value]) => [name, value.startsWith(`${workdir}/`) ? join(ROOT, value.slice(workdir.length + 1)) : value]))
}

/** An exec-form instruction's argument list: `ENTRYPOINT [...]`, `HEALTHCHECK ... CMD [...]`. */
function execForm(pattern: RegExp): string[] {
  const match = pattern.exec(finalStage().join('\n'))
  if (match === null) throw new Error(`no ${String(pattern)} in the Dockerfile's final stage`)
  return JSON.parse(match[1] as string) as string[]
}

export function imageEntrypoint(): string[] {
  return execForm(/^ENTRYPOINT (\[.*\])$/m)
}

export function imageHealthcheck(): string[] {
  return execForm(/^HEALTHCHECK .*?CMD (\[.*\])$/m)
}

export interface ComposeService {
  image?: string
  build?: unknown
  command?: string[]
  environment?: Record<string, string>
  depends_on?: Record<string, { condition?: string }> | string[]
  healthcheck?: { test: string[] }
  configs?: { source: string; target: string }[]
}

export interface ComposeFile {
  services: Record<string, ComposeService>
  configs: Record<string, { content: string }>
}

/** docker-compose.yml with its merge keys (`<<: *gateway`) applied, as Compose reads it. */
export function composeFile(): ComposeFile {
  return parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as ComposeFile
}
