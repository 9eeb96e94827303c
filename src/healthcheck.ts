import { request } from 'node:http'
import { parseArgs } from 'node:util'
import { readAdminAddress } from './config/admin-address.js'
import { resolveConfigPath } from './config/config-path.js'

/** Where the command's lines go: the CLI passes stdout and stderr. */
export interface HealthcheckOutput {
  out(line: string): void
  err(line: string): void
}

/** SPEC 18: healthy is a 200 from `/healthz` within this long, connection included. */
const PROBE_TIMEOUT_MS = 2_000

/**
 * `v4gw healthcheck [--config FILE]`, the Docker HEALTHCHECK (SPEC 18): probes the admin
 * listener's `GET /healthz` at the address the gateway's own config gives, so that a mounted
 * config with another admin port is probed where the gateway listens. Resolves with the exit
 * code: 0 healthy, 1 not. Loaded apart from the rest of the CLI (cli.ts), as it runs every few
 * seconds: it reads two keys of the file and sends one request.
 */
export async function runHealthcheck(args: string[], output: HealthcheckOutput): Promise<number> {
  const { values } = parseArgs({ args, options: { config: { type: 'string', short: 'c' } } })
  const { host, port, notes } = await readAdminAddress(resolveConfigPath(values.config))
  for (const note of notes) output.err(`v4gw healthcheck: ${note}`)
  const status = await probe(host, port)
  const where = `http://${host.includes(':') ? `[${host}]` : host}:${port}/healthz`
  if (status === 200) {
    output.out(`healthy: ${where} answered 200`)
    return 0
  }
  output.err(`unhealthy: ${where} ${typeof status === 'number' ? `answered ${status}` : status}`)
  return 1
}

/** The status `/healthz` answers with, or why there is none. */
function probe(host: string, port: number): Promise<number | string> {
  return new Promise((resolve) => {
    const call = request({ host, port, path: '/healthz', method: 'GET', agent: false, headers: { connection: 'close' } }, (response) => {
      clearTimeout(deadline)
      response.resume()
      resolve(response.statusCode ?? 'gave no status')
      call.destroy()
    })
    const deadline = setTimeout(() => {
      resolve(`did not answer within ${PROBE_TIMEOUT_MS} ms`)
      call.destroy()
    }, PROBE_TIMEOUT_MS)
    call.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(deadline)
      resolve(`could not be reached (${error.code ?? error.message})`)
    })
    call.end()
  })
}
