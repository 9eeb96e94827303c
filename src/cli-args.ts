/** What a command line asks for; no dependencies, so the entry can tell before loading the rest. */
export type CliCommand = 'help' | 'version' | 'run' | 'simulator' | 'check-config' | 'explain' | 'config-schema' | { unknown: string }

/** `--help` anywhere before a `--`: the usage, whatever else the line holds. */
function asksForHelp(args: string[]): boolean {
  const end = args.indexOf('--')
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h')
}

const NAMED = new Set(['simulator', 'check-config', 'explain', 'config-schema', 'run'])

/** The command of `argv` and the arguments it takes: a bare `v4gw [--config FILE]` runs the gateway. */
export function parseCommandLine(argv: string[]): { command: CliCommand; args: string[] } {
  const [first, ...rest] = argv
  if (first === 'help' || asksForHelp(argv)) return { command: 'help', args: [] }
  if (first === '--version' || first === '-v') return { command: 'version', args: [] }
  if (first === undefined || first.startsWith('-')) return { command: 'run', args: argv }
  if (NAMED.has(first)) return { command: first as CliCommand, args: rest }
  return { command: { unknown: first }, args: rest }
}
