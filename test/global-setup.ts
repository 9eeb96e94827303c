import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const builtCli = join(root, 'dist', 'cli.js')

/** The newest modification time of the build's inputs: every file under src/ and the tsconfigs. */
function newestInputMs(): number {
  const inputs = [join(root, 'tsconfig.json'), join(root, 'tsconfig.build.json')]
  const entries = readdirSync(join(root, 'src'), { recursive: true, withFileTypes: true })
  for (const entry of entries) if (entry.isFile()) inputs.push(join(entry.parentPath, entry.name))
  return Math.max(...inputs.map((path) => statSync(path).mtimeMs))
}

/**
 * Builds dist/ once per test run, so that the CLI tests can spawn `node dist/cli.js`; skipped
 * when dist/cli.js is newer than every input. A type error elsewhere does not stop the run (tsc
 * still emits): only a build that leaves no dist/cli.js does.
 */
export default function setup(): void {
  if (existsSync(builtCli) && statSync(builtCli).mtimeMs >= newestInputMs()) return
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc')
  try {
    execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { cwd: root, stdio: 'pipe' })
  } catch (error) {
    const output = (error as { stdout?: Buffer }).stdout?.toString('utf8') ?? String(error)
    if (!existsSync(builtCli)) throw new Error(`the TypeScript build produced no dist/cli.js:\n${output}`)
    process.stderr.write(`global-setup: tsc reported errors, dist/ was emitted anyway:\n${output}\n`)
  }
}
