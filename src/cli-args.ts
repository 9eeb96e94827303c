/** The commands named by their first word; `help`, `version` and a bare run are read apart. */
export const NAMED_COMMANDS = ['run', 'simulator', 'report', 'sunset-check', 'calendar', 'legacy-simulator', 'check-config', 'explain', 'config-schema', 'healthcheck', 'fingerprint'] as const

/** What a command line asks for; no dependencies, so the entry can tell before loading the rest. */
export type CliCommand = (typeof NAMED_COMMANDS)[number] | 'help' | 'version' | { unknown: string }

function isNamedCommand(word: string): word is (typeof NAMED_COMMANDS)[number] {
  return (NAMED_COMMANDS as readonly string[]).includes(word)
}

/** `--help` anywhere before a `--`: the help, whatever else the line holds. */
function asksForHelp(args: string[]): boolean {
  const end = args.indexOf('--')
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h')
}

/** The command whose help `v4gw COMMAND --help` or `v4gw help COMMAND` asks for, if it names one. */
function helpTopic(word: string | undefined): string[] {
  return word !== undefined && isNamedCommand(word) ? [word] : []
}

/** The command of `argv` and the arguments it takes: a bare `v4gw [--config FILE]` runs the gateway. */
export function parseCommandLine(argv: string[]): { command: CliCommand; args: string[] } {
  const [first, ...rest] = argv
  if (first === 'help') return { command: 'help', args: helpTopic(rest[0]) }
  if (asksForHelp(argv)) return { command: 'help', args: helpTopic(first) }
  if (first === '--version' || first === '-v') return { command: 'version', args: [] }
  if (first === undefined || first.startsWith('-')) return { command: 'run', args: argv }
  if (isNamedCommand(first)) return { command: first, args: rest }
  return { command: { unknown: first }, args: rest }
}

/**
 * What a command line's error says: Node's parseArgs quotes a stray argument, which may be a
 * credential typed in the wrong place (SPEC 12: never on the command line), so that one is said
 * without it.
 */
export function usageErrorText(error: unknown): string {
  return (error as { code?: unknown }).code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL' ? 'an argument this command does not take (not repeated: it may be a credential)' : String((error as Error).message)
}
