#!/usr/bin/env node
import { parseCommandLine, usageErrorText } from './cli-args.js'
import { nodeOptions, productionFlagsOff } from './config/node-options.js'
import { holdSignals } from './held-signals.js'
import { missingProductionFlags, relaunchWithFlags, stopWithLauncher } from './node-flags.js'

// Only these two small modules load before the signals are held; the rest (fastify, undici, zod)
// takes a few hundred ms, and a SIGTERM or SIGHUP then must reach the gateway, not end the process.
const commandLine = parseCommandLine(process.argv.slice(2))
// The gateway runs with the production Node flags however it is started (node-flags.ts).
const missingFlags = commandLine.command === 'run' && !productionFlagsOff() ? missingProductionFlags(process.execArgv, nodeOptions()) : []
if (missingFlags.length > 0) {
  await relaunchWithFlags(missingFlags)
} else if (commandLine.command === 'healthcheck') {
  // The Docker HEALTHCHECK runs this every few seconds: it loads only what it needs, and exits 0
  // or 1 only, as Docker reserves every other code (2 included).
  const { runHealthcheck } = await import('./healthcheck.js')
  process.exitCode = await runHealthcheck(commandLine.args, { out: console.log, err: console.error }).catch((error: unknown) => {
    console.error(`v4gw healthcheck: ${usageErrorText(error)}`)
    return 1
  })
} else {
  const held = commandLine.command === 'run' ? holdSignals() : undefined
  if (commandLine.command === 'run') stopWithLauncher()
  const { runCli } = await import('./cli-commands.js')
  runCli(commandLine, held)
}
