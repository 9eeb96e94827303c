export { createSimulator } from './create-simulator.js'
export { DEFAULT_SIMULATOR_OPTIONS } from './options.js'
export { SIMULATOR_ERROR_STATUS, SimulatorError } from './errors.js'
export type { SimulatorErrorCode } from './errors.js'
export type {
  EffectiveContext,
  GovernanceDefaults,
  Simulator,
  SimulatorCall,
  SimulatorIdentity,
  SimulatorOptions
} from './types.js'
