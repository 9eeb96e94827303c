import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

/**
 * `import-x/no-cycle` (eslint.config.js) skips `import type`, and the layer rules only see
 * imports between folders. A cycle of type imports inside one folder still ties its modules
 * into one knot, so this reads every import of src/ (types included) and looks for cycles.
 */
const SRC = join(import.meta.dirname, '../../../src')

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return entry.name.endsWith('.ts') ? [path] : []
  })
}

/** Each file's relative imports, as src-relative paths of the .ts files they name. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>()
  for (const file of sourceFiles(SRC)) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true)
    const targets = importedFiles
      .map(({ fileName }) => fileName)
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => relative(SRC, join(dirname(file), specifier)).replace(/\.js$/, '.ts'))
    graph.set(relative(SRC, file), targets)
  }
  return graph
}

/** Tarjan's strongly connected components with more than one file: each is at least one cycle. */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  function visit(file: string): void {
    index.set(file, next)
    low.set(file, next++)
    stack.push(file)
    onStack.add(file)
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue
      if (!index.has(target)) {
        visit(target)
        low.set(file, Math.min(low.get(file)!, low.get(target)!))
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!))
      }
    }
    if (low.get(file) !== index.get(file)) return
    const component: string[] = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== file)
    if (component.length > 1) found.push(component.sort())
  }
  for (const file of graph.keys()) if (!index.has(file)) visit(file)
  return found
}

describe('the import graph of src/', () => {
  it('has no cycles, counting type-only imports', () => {
    const graph = importGraph()
    expect(graph.size).toBeGreaterThan(50)
    // Each knot is listed with its edges, so the failure says which import to cut.
    const knots = cycles(graph).map((component) => component.flatMap((file) => (graph.get(file) ?? []).filter((target) => component.includes(target)).map((target) => `${file} -> ${target}`)))
    expect(knots).toEqual([])
  })

  it('finds a cycle of type-only imports, so the check above can fail', () => {
    const graph = new Map([
      ['sessions/a.ts', ['sessions/b.ts']],
      ['sessions/b.ts', ['sessions/a.ts']],
      ['util/c.ts', []]
    ])
    expect(cycles(graph)).toEqual([['sessions/a.ts', 'sessions/b.ts']])
  })
})
