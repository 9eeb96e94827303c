import { readdirSync } from 'node:fs'
import { URL } from 'node:url'
import js from '@eslint/js'
import importX, { createNodeResolver } from 'eslint-plugin-import-x'
import tseslint from 'typescript-eslint'

/*
 * The architecture of src/, as lint rules (docs/architecture.md has the picture).
 *
 * LAYERS lists the folders from the bottom up. A folder imports its own files and the folders
 * on rows below it; never a row above, nor a peer on its own row. `app` is the top: the files
 * directly in src/ (process entry, CLI, composition root) and src/app/. Type-only imports count:
 * a type that points upward ties the layers together as much as a value does.
 */
const LAYERS = [
  ['util'],
  ['errors'],
  ['config'],
  ['observability', 'credentials', 'upstream'],
  ['tracing'], // SPEC 17's spans and their export: the only user of OpenTelemetry
  ['store'], // the shared store: one Redis connection, its health and clock (SPEC 12)
  ['sessions', 'fleet'],
  ['kernel'], // node:http server mechanics
  ['legacy', 'passthrough'],
  ['tenancy'],
  ['plan'], // the pure request planner
  ['traffic'], // runs the plan
  ['admin'],
  ['app']
]

/** Stands beside the table: the built-in V4 simulator (SPEC 11) shares only util/ with the gateway, and only `app` starts it. */
const SIMULATOR = { folder: 'simulator', mayImport: ['util'] }

/**
 * One owner per library (STYLE.md). pino and prom-client allow `import type` elsewhere: a
 * `Logger` handed in is a plain interface, and the rule is about who builds loggers and metrics.
 * undici, lru-cache and ioredis allow not even a type: nothing outside their owner needs one.
 */
const OWNERS = [
  { library: 'undici', owner: 'upstream' },
  { library: 'lru-cache', owner: 'sessions' },
  { library: 'ioredis', owner: 'store' },
  { library: 'pino', owner: 'observability', allowTypeImports: true },
  { library: 'prom-client', owner: 'observability', allowTypeImports: true },
  // Every @opentelemetry/* package: spans are made and exported in src/tracing/ alone.
  { library: '@opentelemetry', owner: 'tracing' }
]

/** Only config/ reads the environment: the load pipeline substitutes it, once (STYLE.md). */
const ENV_OWNER = 'config'

/**
 * TODO(rebuild): edges that break the table today, in files being rebuilt by someone else.
 * Each entry lifts one folder's ban for one file; delete it with the fix.
 */
const LAYER_TODO = []

const FOLDERS = [...LAYERS.flat(), SIMULATOR.folder]
const unplaced = readdirSync(new URL('src', import.meta.url), { withFileTypes: true }).filter((entry) => entry.isDirectory() && !FOLDERS.includes(entry.name))
if (unplaced.length > 0) throw new Error(`eslint.config.js: place src/${unplaced[0].name}/ in LAYERS, so the layer rules cover it`)
const rowOf = new Map(LAYERS.flatMap((row, index) => row.map((folder) => [folder, index])))

function filesOf(folder) {
  return folder === 'app' ? ['src/*.ts', 'src/app/**'] : [`src/${folder}/**`]
}

/** The folders `folder` may not import. */
function bannedFrom(folder) {
  if (folder === SIMULATOR.folder) return FOLDERS.filter((other) => other !== folder && !SIMULATOR.mayImport.includes(other))
  if (folder === 'app') return []
  const row = rowOf.get(folder)
  return FOLDERS.filter((other) => other !== folder && (other === SIMULATOR.folder || rowOf.get(other) >= row))
}

/** A relative import of `target` as written from src/<folder>/ (imports are relative and end in .js). */
function importPattern(target) {
  return target === 'app' ? '^\\.\\./(?:app/|[^/]+\\.js$)' : `^(?:\\.\\.?/)+${target}/`
}

function restrictedImports(folder, allowed = []) {
  const layerPatterns = bannedFrom(folder)
    .filter((target) => !allowed.includes(target))
    .map((target) => ({
      regex: importPattern(target),
      caseSensitive: true,
      message:
        folder === SIMULATOR.folder || target === SIMULATOR.folder
          ? `src/${folder}/ may not import ${target === 'app' ? 'the app level' : `src/${target}/`}: the simulator shares only src/util/ with the gateway, and only the app level starts it.`
          : `src/${folder}/ may not import ${target === 'app' ? 'the app level (src/*.ts, src/app/)' : `src/${target}/`}: the layers in eslint.config.js point one way. Pass the value in, or move the shared piece down.`
    }))
  const ownerPatterns = OWNERS.filter(({ owner }) => owner !== folder).map(({ library, owner, allowTypeImports = false }) => ({
    regex: `^${library}(?:/|$)`,
    caseSensitive: true,
    allowTypeImports,
    message: `only src/${owner}/ uses ${library}${allowTypeImports ? ' (import type is fine)' : ''}; ask it for a plain value instead.`
  }))
  const envPaths =
    folder === ENV_OWNER
      ? []
      : ['process', 'node:process'].map((name) => ({ name, importNames: ['env'], message: `only src/${ENV_OWNER}/ reads the environment.` }))
  return ['error', { paths: envPaths, patterns: [...layerPatterns, ...ownerPatterns] }]
}

const architecture = [
  ...FOLDERS.map((folder) => ({
    name: `architecture/${folder}`,
    files: filesOf(folder),
    rules: { '@typescript-eslint/no-restricted-imports': restrictedImports(folder) }
  })),
  ...LAYER_TODO.map(({ file, imports, fix }) => ({
    name: `architecture/todo ${file} -> ${imports} (${fix})`,
    files: [file],
    rules: { '@typescript-eslint/no-restricted-imports': restrictedImports(file.split('/')[1], [imports]) }
  })),
  {
    name: 'architecture/env',
    files: ['src/**'],
    ignores: [`src/${ENV_OWNER}/**`],
    rules: {
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: `only src/${ENV_OWNER}/ reads the environment: take the value from the config.` }]
    }
  },
  {
    // A dynamic import would slip past the table; only the process entry loads a module late.
    name: 'architecture/no-dynamic-import',
    files: ['src/**'],
    ignores: ['src/*.ts'],
    rules: { 'no-restricted-syntax': ['error', { selector: 'ImportExpression', message: 'import statically, so the layer rules see it.' }] }
  },
  {
    // Runtime cycles anywhere in src/ (import-x skips `import type`; the layers above catch
    // type-only cycles between folders, test/unit/architecture catches them within one).
    name: 'architecture/no-cycle',
    files: ['src/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js'],
      // Imports name the emitted .js file (NodeNext); the source is the .ts beside it.
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js'], extensionAlias: { '.js': ['.ts', '.js'] } })]
    },
    rules: { 'import-x/no-cycle': ['error', { ignoreExternal: true }] }
  }
]

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'coverage/', '.bench-out/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error'
    }
  },
  {
    files: ['src/cli.ts', 'src/cli-commands.ts', 'bench/**', 'scripts/**'],
    rules: { 'no-console': 'off' }
  },
  ...architecture
)
