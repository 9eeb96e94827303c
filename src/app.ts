// The package's entry (package.json "main"): the composition root is in app/ — wiring in
// build-gateway.ts, config swaps in reload.ts, draining and closing in shutdown.ts.
export { buildGateway } from './app/build-gateway.js'
export type { Gateway, GatewayOptions, ListenAddresses } from './app/gateway.js'
