import { describe, expect, it } from 'vitest'
import { normalizeHost } from '../../../src/util/normalize-host.js'

describe('normalizeHost', () => {
  it('lower-cases a host name', () => {
    expect(normalizeHost('API.Example.COM')).toBe('api.example.com')
  })

  it('removes the port', () => {
    expect(normalizeHost('api.example.com:8443')).toBe('api.example.com')
  })

  it('removes the trailing dot of a fully qualified name, with or without a port', () => {
    expect(normalizeHost('API.example.com.')).toBe('api.example.com')
    expect(normalizeHost('api.example.com.:8443')).toBe('api.example.com')
  })

  it('keeps the brackets of an IPv6 literal and removes its port', () => {
    expect(normalizeHost('[::1]:8080')).toBe('[::1]')
  })

  it('lower-cases an IPv6 literal without a port', () => {
    expect(normalizeHost('[2001:DB8::1]')).toBe('[2001:db8::1]')
  })

  it('returns undefined for a missing or empty Host', () => {
    expect(normalizeHost(undefined)).toBeUndefined()
    expect(normalizeHost('')).toBeUndefined()
  })
})
