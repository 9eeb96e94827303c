import { describe, expect, it } from 'vitest'
import { configSchema } from '../../../src/config/schema.js'
import { buildGatewayRuntime, fleetIdOf } from '../../../src/tenancy/gateway-runtime.js'

const TENANTS = { tenancy: { default: 'acme' }, tenants: { acme: { upstream: { staging: 'http://127.0.0.1:9' } } } }
const MEMORY = configSchema.parse(TENANTS)
const REDIS = configSchema.parse({ ...TENANTS, store: { kind: 'redis', redis: { url: 'redis://127.0.0.1:6379', keyPrefix: 'fleet-a:' } } })

/** SPEC 14's Via member: the fleet id of the store the process runs on, which only a restart changes (SPEC 12). */
describe('the fleet id across a reload', () => {
  it('is the random process id with store memory and the key family\'s with Redis', () => {
    expect(buildGatewayRuntime(MEMORY, undefined, { processFleetId: 'a1b2c3d4e5f6' }).via).toBe('1.1 v4gw-a1b2c3d4e5f6')
    expect(buildGatewayRuntime(REDIS, undefined, { processFleetId: 'a1b2c3d4e5f6' }).via).toBe(`1.1 v4gw-${fleetIdOf(REDIS)}`)
  })

  it('stays the first runtime\'s when a reload changes the restart-only store', () => {
    const started = buildGatewayRuntime(MEMORY, undefined, { processFleetId: 'a1b2c3d4e5f6' })
    // reload.ts builds the next runtime with the previous one's context.
    const reloaded = buildGatewayRuntime(REDIS, undefined, started.context)
    expect(reloaded.via).toBe(started.via)
    expect(reloaded.viaReceivedBy).toBe(started.viaReceivedBy)
  })
})
