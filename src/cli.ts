#!/usr/bin/env node
import { parseCommandLine } from './cli-args.js'
import { holdSignals } from './held-signals.js'

// Only these two small modules load before the signals are held; the rest (fastify, undici, zod)
// takes a few hundred ms, and a SIGTERM or SIGHUP then must reach the gateway, not end the process.
const commandLine = parseCommandLine(process.argv.slice(2))
const held = commandLine.command === 'run' ? holdSignals() : undefined
const { runCli } = await import('./cli-commands.js')
runCli(commandLine, held)
