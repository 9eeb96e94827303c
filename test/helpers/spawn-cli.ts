import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ownedBySuite, ownedByTest } from './teardown.js'

// dist/ is built by test/global-setup.ts.
export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const CLI = join(ROOT, 'dist', 'cli.js')

export interface CliOptions {
  /** Added to the environment, which has no V4GW_* variables of the test run's own. */
  env?: Record<string, string>
  /** Node's own flags, before the script (`--import`, ...). */
  nodeArgs?: string[]
}

export interface RunningCli {
  child: ChildProcess
  stdout(): string
  stderr(): string
  /** stdout and stderr as they arrived, interleaved. */
  output(): string
  /** Resolves with the first match of `pattern` in stdout; rejects on exit or after `ms`. */
  waitFor(pattern: RegExp, ms?: number): Promise<RegExpMatchArray>
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  /** Teardown: SIGKILL if it still runs, then waits for it to be gone. */
  kill(): Promise<void>
}

/** Spawns `node [nodeArgs] dist/cli.js ...args` in the repository root. */
function launchCli(args: string[], options: CliOptions): RunningCli {
  const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('V4GW_')))
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), CLI, ...args], { cwd: ROOT, env: { ...baseEnv, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  let all = ''
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8')
    all += chunk.toString('utf8')
  })
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8')
    all += chunk.toString('utf8')
  })
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal }))
  })
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    output: () => all,
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
    waitFor(pattern, ms = 10_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const match = pattern.exec(out)
          if (match !== null) {
            cleanup()
            resolve(match)
          }
        }
        const timer = setTimeout(() => {
          cleanup()
          reject(new Error(`no ${String(pattern)} on stdout within ${ms} ms; stdout: ${out}; stderr: ${err}`))
        }, ms)
        const onExit = (): void => {
          cleanup()
          reject(new Error(`the CLI exited before printing ${String(pattern)}; stdout: ${out}; stderr: ${err}`))
        }
        const cleanup = (): void => {
          clearTimeout(timer)
          child.stdout?.off('data', check)
          child.off('close', onExit)
        }
        child.stdout?.on('data', check)
        child.once('close', onExit)
        check()
      })
    }
  }
}

/** The built CLI as its own process for the running test, killed when it finishes (see ./teardown.ts). */
export function spawnCli(args: string[], options: CliOptions = {}): Promise<RunningCli> {
  return ownedByTest('spawnCli', async () => launchCli(args, options), (running) => running.kill())
}

/** The same for every test of the enclosing describe; `args` is called in the beforeAll (it may write a config first). */
export function useCli(args: () => string[] | Promise<string[]>, options: CliOptions = {}): RunningCli {
  return ownedBySuite('useCli', async () => launchCli(await args(), options), (running) => running.kill())
}

/** Runs the CLI to its end. */
export async function runCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const running = await spawnCli(args, { env })
  const { code } = await running.exited
  return { code, stdout: running.stdout(), stderr: running.stderr() }
}
