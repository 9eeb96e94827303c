import type { ChildProcess } from 'node:child_process'
import { spawnCli } from './spawn-cli.js'

export interface SpawnedGateway {
  child: ChildProcess
  url: string
  adminUrl: string
  output(): string
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>
}

/**
 * The built CLI (`dist/cli.js`, made by test/global-setup.ts) as its own process, for what only a
 * process shows: signals, exit codes. Resolves once it prints where it listens; killed when the
 * running test finishes.
 */
export async function spawnGateway(configPath: string, timeoutMs = 10_000): Promise<SpawnedGateway> {
  const running = await spawnCli(['--config', configPath])
  const match = await running.waitFor(/v4gw listening on (\S+) \(admin (\S+)\)/, timeoutMs)
  return { child: running.child, url: match[1] as string, adminUrl: match[2] as string, output: running.output, exited: running.exited.then(({ code }) => code) }
}
