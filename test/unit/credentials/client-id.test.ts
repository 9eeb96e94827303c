import { hash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { compileClientKey, credentialClientId, headerClientId, resolveClientId } from '../../../src/credentials/client-id.js'

const sha16 = (text: string): string => hash('sha256', text, 'hex').slice(0, 16)

describe('SPEC 12 client ids', () => {
  it('gives fp: and the first 16 lowercase hex digits of the credential SHA-256', () => {
    expect(credentialClientId('tok-1')).toBe(`fp:${sha16('tok-1')}`)
    expect(credentialClientId('tok-1')).toMatch(/^fp:[0-9a-f]{16}$/)
  })

  it('gives hdr:<value> for 1-128 characters of [A-Za-z0-9._:-], else hdr# and 16 hex digits of its SHA-256', () => {
    expect(headerClientId('billing-batch.7:eu_1', 'latin1')).toBe('hdr:billing-batch.7:eu_1')
    expect(headerClientId('a'.repeat(128), 'latin1')).toBe(`hdr:${'a'.repeat(128)}`)
    expect(headerClientId('a'.repeat(129), 'latin1')).toBe(`hdr#${sha16('a'.repeat(129))}`)
    expect(headerClientId('two words', 'utf8')).toBe(`hdr#${sha16('two words')}`)
    expect(headerClientId('caf\u00e9', 'utf8')).toBe(`hdr#${sha16('caf\u00e9')}`)
  })

  it('hashes a header value\'s bytes: UTF-8 as Node\'s parser gives them (one character per byte) has the id of the same text', () => {
    const wire = Buffer.from('caf\u00e9 \u00fcber', 'utf8').toString('latin1')
    expect(wire).not.toBe('caf\u00e9 \u00fcber')
    expect(headerClientId(wire, 'latin1')).toBe(headerClientId('caf\u00e9 \u00fcber', 'utf8'))
    expect(resolveClientId(compileClientKey(['header:x-client-id']), () => wire, () => undefined)).toBe(`hdr#${sha16('caf\u00e9 \u00fcber')}`)
  })

  it('takes the first source that yields a value, and asks for the credential only when it reaches that source', () => {
    const key = compileClientKey(['header:x-client-id', 'credential'])
    let asked = 0
    const fingerprint = () => {
      asked++
      return hash('sha256', 'tok-1', 'hex')
    }
    expect(resolveClientId(key, (name) => (name === 'x-client-id' ? 'batch-7' : undefined), fingerprint)).toBe('hdr:batch-7')
    expect(asked).toBe(0)
    expect(resolveClientId(key, () => undefined, fingerprint)).toBe(`fp:${sha16('tok-1')}`)
    // An empty header yields nothing.
    expect(resolveClientId(key, () => '', fingerprint)).toBe(`fp:${sha16('tok-1')}`)
    expect(asked).toBe(2)
  })

  it('is anonymous when no source yields a value', () => {
    expect(resolveClientId(compileClientKey(['header:x-client-id', 'credential']), () => undefined, () => undefined)).toBe('anonymous')
    expect(resolveClientId(compileClientKey(['header:x-client-id']), () => undefined, () => 'f'.repeat(64))).toBe('anonymous')
  })
})
