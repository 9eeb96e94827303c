import { describe, expect, it } from 'vitest'
import { isLoopbackPeer } from '../../../src/admin/admin-guards.js'

/** SPEC 18's peer check, on the addresses Node reports; a link-local peer comes with its zone id. */
describe('isLoopbackPeer', () => {
  it.each([
    ['127.0.0.1', true],
    ['127.8.9.10', true],
    ['::1', true],
    ['::ffff:127.0.0.1', true],
    ['10.0.0.1', false],
    ['::ffff:10.0.0.1', false],
    ['fe80::1%eth0', false],
    ['fe80::1%2', false],
    [undefined, false]
  ])('%s is loopback: %s (a zone id neither throws nor changes the address)', (address, loopback) => {
    expect(isLoopbackPeer(address)).toBe(loopback)
  })
})
