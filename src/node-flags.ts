import { spawn } from 'node:child_process'

/**
 * The V8 flags the gateway runs with (docs/performance.md, "Node flags"): a 32 MiB young
 * generation, so per-request objects die there instead of being promoted; a 128 MiB first
 * old-space limit, so the first full GC waits until the old space nears it (in the bench's
 * windows every ~15 s instead of every 2-6 s; in a long soak, once it is reached, every few
 * seconds: docs/soak.md); and no
 * allocation-site pretenuring, whose guess sends streamed requests' objects to the old space.
 * `npm start` and the Docker image pass them; a plain `node dist/cli.js` or `npx v4gw` gets them
 * from `relaunchWithFlags`.
 */
export const PRODUCTION_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=32', '--initial-old-space-size=128', '--no-allocation-site-pretenuring']

/** `--name=value` or `--no-name` → `name`, so that a flag set to another value counts as set. */
function flagName(flag: string): string {
  const bare = flag.replace(/^--/, '').split('=')[0] as string
  return (bare.startsWith('no-') ? bare.slice(3) : bare).replaceAll('_', '-')
}

/**
 * The production flags the process was not started with, on its command line or in
 * NODE_OPTIONS. A flag given another value (`--max-semi-space-size=64`, `--allocation-site-pretenuring`)
 * is the operator's choice and stays.
 */
export function missingProductionFlags(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = new Set([...execArgv, ...(nodeOptions ?? '').split(/\s+/)].filter((arg) => arg.startsWith('--')).map(flagName))
  return PRODUCTION_NODE_FLAGS.filter((flag) => !given.has(flagName(flag)))
}

/** Signals the gateway acts on (SIGTERM and SIGINT drain, SIGHUP reloads), passed to the child. */
const FORWARDED_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP']

/**
 * Starts this same command again with `flags` in front. Where Node has `process.execve` (22.15+,
 * 24) the process image is replaced: same PID (PID 1 in a container stays the gateway), nothing
 * left behind. On older Node a child runs it: the signals the gateway acts on are passed on, this
 * process ends as the child ends, with its code or its signal, and the child drains and stops if
 * this process is killed outright (`stopWithLauncher`). Never returns.
 */
export async function relaunchWithFlags(flags: readonly string[]): Promise<never> {
  const args = [...flags, ...process.execArgv, ...process.argv.slice(1)]
  const execve = (process as { execve?: (file: string, args: string[]) => never }).execve
  if (typeof execve === 'function') execve.call(process, process.execPath, [process.execPath, ...args])
  // The IPC channel only tells the child when this process is gone.
  const child = spawn(process.execPath, args, { stdio: ['inherit', 'inherit', 'inherit', 'ipc'] })
  for (const signal of FORWARDED_SIGNALS) process.on(signal, () => child.kill(signal))
  return new Promise<never>(() => {
    child.once('exit', (code, signal) => {
      if (signal === null) process.exit(code ?? 1)
      // Ended by a signal: this process ends by the same one, as a shell would report it.
      for (const forwarded of FORWARDED_SIGNALS) process.removeAllListeners(forwarded)
      process.kill(process.pid, signal)
    })
  })
}

/**
 * In a gateway started by `relaunchWithFlags` as a child: when the launcher is gone (killed with
 * SIGKILL, which it cannot pass on), a SIGTERM to itself, so it drains and stops rather than run
 * on orphaned. The channel does not keep the process alive.
 */
export function stopWithLauncher(): void {
  const channel = (process as { channel?: { unref(): void } }).channel
  if (channel === undefined) return
  channel.unref()
  process.once('disconnect', () => process.kill(process.pid, 'SIGTERM'))
}
