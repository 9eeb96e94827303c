import { availableParallelism } from 'node:os'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
    // Most files wait on sockets, child processes and timers rather than compute, so one file per
    // core (vitest's default is one fewer than the cores: a single worker on the 2-core machines
    // CI runs on) leaves the cores idle; one more than the cores halves `npm test` there.
    maxWorkers: availableParallelism() + 1,
    minWorkers: 1,
    reporters: ['default']
  }
})
