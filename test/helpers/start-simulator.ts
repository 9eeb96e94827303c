import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.js'
import { ownedBySuite, ownedByTest } from './teardown.js'

export interface StartedSimulator {
  simulator: Simulator
  url: string
  close(): Promise<void>
}

async function launchSimulator(options: SimulatorOptions | undefined): Promise<StartedSimulator> {
  const simulator = createSimulator(options)
  const url = await simulator.listen({ host: '127.0.0.1', port: 0 })
  return { simulator, url, close: () => simulator.close() }
}

/** The built-in V4 simulator for the running test, closed when it finishes (see ./teardown.ts). */
export function startSimulator(options?: SimulatorOptions): Promise<StartedSimulator> {
  return ownedByTest('startSimulator', () => launchSimulator(options), (started) => started.close())
}

/** The built-in V4 simulator for every test of the enclosing describe, closed after the last one. */
export function useSimulator(options?: SimulatorOptions): StartedSimulator {
  return ownedBySuite('useSimulator', () => launchSimulator(options), (started) => started.close())
}
