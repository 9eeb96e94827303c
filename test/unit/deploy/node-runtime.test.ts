import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'

const root = new URL('../../../', import.meta.url)
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8')

/** Whether `version` (`v24.21.0`) is in an npm range made of `^x.y.z` alternatives, the only form `engines` uses here. */
function inCaretRanges(version: string, range: string): boolean {
  const [major, minor, patch] = version.replace(/^v/, '').split('.').map(Number) as [number, number, number]
  return range.split('||').some((alternative) => {
    const match = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(alternative)
    if (match === null) throw new Error(`engines alternative "${alternative}" is not ^x.y.z`)
    const [low, lowMinor, lowPatch] = match.slice(1).map(Number) as [number, number, number]
    return major === low && (minor > lowMinor || (minor === lowMinor && patch >= lowPatch))
  })
}

/** SPEC 18: the image runs Node 24 LTS; package.json and the README say what is supported, which is what CI runs. */
describe('the Node versions the gateway runs on', () => {
  const packageJson = JSON.parse(read('package.json')) as { engines: { node: string } }
  const ciNode24 = /^NODE24_VERSION=(24\.\d+\.\d+)$/m.exec(read('.ci/run'))?.[1]
  const ciNode22 = /^NODE22_VERSION=(22\.\d+\.\d+)$/m.exec(read('.ci/run'))?.[1]
  const ciNode20 = /^NODE20_VERSION=(20\.\d+\.\d+)$/m.exec(read('.ci/run'))?.[1]

  it('builds and runs the image on Node 24 LTS, in every stage', () => {
    const bases = [...read('Dockerfile').matchAll(/^FROM (\S+)/gm)].map((match) => match[1])
    expect(bases.length).toBeGreaterThanOrEqual(2)
    expect(new Set(bases)).toEqual(new Set(['node:24-bookworm-slim']))
  })

  it('says in engines that Node 20.19+, 22.12+ and 24 are supported (SPEC 1, 18), and no other major', () => {
    const range = packageJson.engines.node
    expect(range).toBe('^20.19.0 || ^22.12.0 || ^24.0.0')
    expect(inCaretRanges('v20.19.0', range)).toBe(true)
    expect(inCaretRanges('v20.18.3', range)).toBe(false)
    expect(inCaretRanges('v22.12.0', range)).toBe(true)
    expect(inCaretRanges('v22.11.0', range)).toBe(false)
    expect(inCaretRanges('v23.11.0', range)).toBe(false)
    expect(inCaretRanges(`v${ciNode24 ?? 'missing'}`, range)).toBe(true)
    expect(inCaretRanges(`v${ciNode22 ?? 'missing'}`, range)).toBe(true)
    expect(inCaretRanges(`v${ciNode20 ?? 'missing'}`, range)).toBe(true)
    // The suite runs on the machine's Node and on CI's Node 24, 22 and 20: each must be supported.
    expect(inCaretRanges(process.version, range), `this Node, ${process.version}`).toBe(true)
  })

  it("keeps package-lock.json's engines equal to package.json's", () => {
    const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { engines?: { node?: string } }> }
    expect(lock.packages['']?.engines?.node).toBe(packageJson.engines.node)
  })

  it('says the same in the README', () => {
    const readme = read('README.md')
    expect(readme).toMatch(/^## Run it \(fresh machine, Node 24 LTS, 22\.12\+ or 20\.19\+\)$/m)
    expect(readme).toContain('Supported: Node 24 LTS, which the Docker image runs, Node 22.12 or later 22.x, and Node 20.19 or')
  })

  it('runs the suite on each supported major in CI, the machine\'s Node skipping its own pin', () => {
    const run = read('.ci/run')
    for (const major of ['24', '22', '20']) expect(run).toMatch(new RegExp(`^run_suite_on "\\$NODE${major}_VERSION"$`, 'm'))
  })

  it('says the same in docs/deploy.md', () => {
    const deploy = read('docs/deploy.md').replace(/\s+/g, ' ')
    expect(deploy).toContain(`(\`engines\`: \`${packageJson.engines.node}\`)`)
    // Each major `.ci/run` pins, named where the guide says what CI runs.
    expect(deploy).toContain("CI (`.ci/run`) runs the whole suite on the machine's Node and on Node 20, 22 and 24")
  })
})
