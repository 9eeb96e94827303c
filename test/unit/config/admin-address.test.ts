import { describe, expect, it } from 'vitest'
import { readAdminAddress } from '../../../src/config/admin-address.js'
import { useTempDir } from '../../helpers/temp-dir.js'

const dir = useTempDir('v4gw-admin-address-')
let count = 0

async function addressOf(text: string, env: Record<string, string> = {}, extension = 'yaml'): Promise<{ host: string; port: number; notes: string[] }> {
  return readAdminAddress(await dir.write(`config-${++count}.${extension}`, text), env)
}

/** SPEC 18: `v4gw healthcheck` reads admin.host and admin.port only, after env substitution. */
describe('readAdminAddress', () => {
  it('reads admin.host and admin.port as written', async () => {
    expect(await addressOf('admin: { host: 10.1.2.3, port: 9999 }\ntenants: {}')).toEqual({ host: '10.1.2.3', port: 9999, notes: [] })
  })

  it('substitutes the environment as the gateway does, defaults included', async () => {
    const text = 'admin:\n  host: ${ADMIN_HOST:-127.0.0.1}\n  port: ${ADMIN_PORT:-9901}\n'
    expect(await addressOf(text, { ADMIN_HOST: '10.0.0.7', ADMIN_PORT: '19901' })).toMatchObject({ host: '10.0.0.7', port: 19901 })
    expect(await addressOf(text, { ADMIN_PORT: '' })).toMatchObject({ host: '127.0.0.1', port: 9901 })
  })

  it("gives a placeholder without a value the key's default", async () => {
    expect(await addressOf('admin:\n  host: ${UNSET_HOST}\n  port: ${UNSET_PORT}\n')).toMatchObject({ host: '127.0.0.1', port: 9901 })
  })

  it('takes the defaults for keys the file does not set, or sets to something that is not an address', async () => {
    expect(await addressOf('tenants: { a: { upstream: { staging: embedded } } }')).toEqual({ host: '127.0.0.1', port: 9901, notes: [] })
    const wrong = await addressOf('admin: { host: [a], port: 70000 }')
    expect(wrong).toMatchObject({ host: '127.0.0.1', port: 9901 })
    expect(wrong.notes).toHaveLength(2)
  })

  it('dials a wildcard host on loopback: 0.0.0.0 as 127.0.0.1, :: as ::1', async () => {
    expect((await addressOf('admin: { host: 0.0.0.0, port: 1 }')).host).toBe('127.0.0.1')
    expect((await addressOf('admin: { host: "::", port: 1 }')).host).toBe('::1')
    expect((await addressOf('admin: { host: "[::]", port: 1 }')).host).toBe('::1')
    expect((await addressOf('admin: { host: "fd00::1", port: 1 }')).host).toBe('fd00::1')
  })

  it('ignores every other problem of the file: a broken value, an unknown key, YAML broken after the admin section', async () => {
    const text = ['admin:', '  port: 19902', 'limits: { bodyBytes: -5 }', 'nonsense: true', 'tenants:', '  acme: [unclosed', ''].join('\n')
    expect(await addressOf(text)).toMatchObject({ host: '127.0.0.1', port: 19902 })
  })

  it('reads the admin section past an unquoted placeholder in a flow collection before it (SPEC 8\'s style)', async () => {
    const text = 'listen: { host: ${V4GW_HOST:-0.0.0.0}, port: 8080 }\nadmin:\n  host: 0.0.0.0\n  port: 9902\n'
    expect(await addressOf(text)).toMatchObject({ host: '127.0.0.1', port: 9902 })
    // An admin value written so is taken as not set: its default, the other value as written.
    expect(await addressOf('admin: { host: ${ADMIN_HOST:-10.0.0.1}, port: 9903 }\n', { ADMIN_HOST: '10.0.0.9' })).toMatchObject({ host: '127.0.0.1', port: 9903 })
  })

  it('reads a JSON file', async () => {
    expect(await addressOf(JSON.stringify({ admin: { host: '127.0.0.9', port: '${P}' } }), { P: '8999' }, 'json')).toMatchObject({ host: '127.0.0.9', port: 8999 })
  })

  it('takes both defaults, and says why, for a file it cannot read', async () => {
    const address = await readAdminAddress(`${dir.path}/no-such-file.yaml`, {})
    expect(address).toMatchObject({ host: '127.0.0.1', port: 9901 })
    expect(address.notes).toEqual([expect.stringContaining('ENOENT')])
  })
})
