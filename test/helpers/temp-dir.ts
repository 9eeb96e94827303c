import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ownedBySuite, ownedByTest } from './teardown.js'

/** A fresh directory under the system's temp dir, removed with all it holds. */
export interface TempDir {
  path: string
  /** Writes `text` to `name` in the directory; resolves with the file's path. */
  write(name: string, text: string): Promise<string>
  remove(): Promise<void>
}

async function makeTempDir(prefix: string): Promise<TempDir> {
  const path = await mkdtemp(join(tmpdir(), prefix))
  return {
    path,
    async write(name, text) {
      const file = join(path, name)
      await writeFile(file, text, 'utf8')
      return file
    },
    remove: () => rm(path, { recursive: true, force: true })
  }
}

/** A temp directory for the running test, removed when it finishes (see ./teardown.ts). */
export function createTempDir(prefix: string): Promise<TempDir> {
  return ownedByTest('createTempDir', () => makeTempDir(prefix), (dir) => dir.remove())
}

/** A temp directory for every test of the enclosing describe, removed after the last one. */
export function useTempDir(prefix: string): TempDir {
  return ownedBySuite('useTempDir', () => makeTempDir(prefix), (dir) => dir.remove())
}
