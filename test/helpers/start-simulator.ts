import { createSimulator, type Simulator, type SimulatorOptions } from '../../src/simulator/index.js'

export interface StartedSimulator {
  simulator: Simulator
  url: string
  close(): Promise<void>
}

export async function startSimulator(options?: SimulatorOptions): Promise<StartedSimulator> {
  const simulator = createSimulator(options)
  const url = await simulator.listen({ host: '127.0.0.1', port: 0 })
  return { simulator, url, close: () => simulator.close() }
}
