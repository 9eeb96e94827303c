import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url))

export interface SpawnedGateway {
  child: ChildProcess
  url: string
  adminUrl: string
  output(): string
  /** Resolves with the exit code once the process has ended. */
  exited: Promise<number | null>
  kill(): void
}

/**
 * The built CLI (`dist/cli.js`, made by test/global-setup.ts) as its own process, for what only a
 * process shows: signals, exit codes. Resolves once it prints where it listens.
 */
export function spawnGateway(configPath: string, timeoutMs = 10_000): Promise<SpawnedGateway> {
  const child = spawn(process.execPath, [cli, '--config', configPath], { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start:\n${output}`)), timeoutMs)
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8')
      const match = /v4gw listening on (\S+) \(admin (\S+)\)/.exec(output)
      if (match !== null) {
        clearTimeout(timer)
        resolve({ child, url: match[1] as string, adminUrl: match[2] as string, output: () => output, exited, kill: () => child.kill('SIGKILL') })
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    void exited.then((code) => {
      clearTimeout(timer)
      reject(new Error(`gateway exited with ${code} before listening:\n${output}`))
    })
  })
}
