// Preloaded with `node --import` by process-signals.test.ts: sends this process the signal named
// in SIGNAL_WHILE_LOADING the moment fastify's module starts to load, a point inside the few
// hundred ms the CLI spends loading its modules, before the gateway starts. fastify is CommonJS,
// so its file goes through Module.prototype.load even when imported from ESM.
import Module from 'node:module'
import process from 'node:process'

const signal = process.env.SIGNAL_WHILE_LOADING
const load = Module.prototype.load
let sent = false
Module.prototype.load = function loadAndSignal(filename, ...rest) {
  if (!sent && signal && /[\\/]node_modules[\\/]fastify[\\/]fastify\.js$/.test(filename)) {
    sent = true
    process.stderr.write(`sending ${signal} while fastify loads\n`)
    process.kill(process.pid, signal)
  }
  return load.call(this, filename, ...rest)
}
