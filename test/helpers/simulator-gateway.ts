import { beforeEach } from 'vitest'
import { testConfig, useGateway, type GatewayOptions, type StartedGateway } from './start-gateway.js'
import { useSimulator, type StartedSimulator } from './start-simulator.js'

/** Config overrides for the gateway, or a function of the simulator's URL that makes them. */
export type Overrides = Record<string, unknown> | ((simulatorUrl: string) => Record<string, unknown>)

/**
 * The most common setup: the built-in simulator and a gateway (tenant `acme`, `testConfig`) in
 * front of it, for every test of the enclosing describe, both closed after the last one. The
 * simulator's call record is emptied before each test, so a test reads only its own calls.
 */
export function useSimulatorGateway(overrides: Overrides = {}, options: GatewayOptions = {}): { sim: StartedSimulator; gw: StartedGateway } {
  const sim = useSimulator()
  const gw = useGateway(() => testConfig(sim.url, typeof overrides === 'function' ? overrides(sim.url) : overrides), options)
  beforeEach(() => {
    sim.simulator.resetCalls()
  })
  return { sim, gw }
}
