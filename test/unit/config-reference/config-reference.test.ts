import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { buildConfigJsonSchema } from '../../../src/config/json-schema.js'

const root = new URL('../../../', import.meta.url)

/** Every key path of a JSON Schema, `tenants.<name>.legacy.routes[].path` style. */
function keyPaths(node: Record<string, unknown>, prefix = ''): string[] {
  const paths: string[] = []
  const properties = node.properties as Record<string, Record<string, unknown>> | undefined
  for (const [key, child] of Object.entries(properties ?? {})) {
    const path = prefix === '' ? key : `${prefix}.${key}`
    paths.push(path, ...keyPaths(child, path))
  }
  const additional = node.additionalProperties
  if (additional !== null && typeof additional === 'object') paths.push(...keyPaths(additional as Record<string, unknown>, `${prefix}.<name>`))
  if (node.items !== undefined) paths.push(...keyPaths(node.items as Record<string, unknown>, `${prefix}[]`))
  for (const branch of [...((node.anyOf as Record<string, unknown>[] | undefined) ?? [])]) paths.push(...keyPaths(branch, prefix))
  return paths
}

describe('the config reference', () => {
  it('keeps config.schema.json equal to the schema generated from zod (run npm run config-schema)', () => {
    const committed: unknown = JSON.parse(readFileSync(new URL('config.schema.json', root), 'utf8'))
    expect(committed).toEqual(buildConfigJsonSchema())
  })

  it('documents every config key of the schema in docs/config.md', () => {
    const doc = readFileSync(new URL('docs/config.md', root), 'utf8')
    const documented = new Set([...doc.matchAll(/^\| `([^`]+)` \|/gm)].map((match) => match[1]))
    const missing = [...new Set(keyPaths(buildConfigJsonSchema()))].filter((path) => !documented.has(path))
    expect(missing).toEqual([])
  })

  it('documents no key that the schema does not have', () => {
    const doc = readFileSync(new URL('docs/config.md', root), 'utf8')
    const known = new Set(keyPaths(buildConfigJsonSchema()))
    const extra = [...doc.matchAll(/^\| `([^`]+)` \|/gm)].map((match) => match[1]).filter((path) => !known.has(path as string))
    expect(extra).toEqual([])
  })
})
