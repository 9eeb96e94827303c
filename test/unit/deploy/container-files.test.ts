import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { loadConfig } from '../../../src/config/load-config.js'
import { composeFile, dockerStages, imageHealthcheck } from '../../helpers/container-files.js'
import { ROOT } from '../../helpers/spawn-cli.js'
import { useTempDir } from '../../helpers/temp-dir.js'

const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')

/** SPEC 18, what can be held from the files without a container engine (container-health.test.ts runs their commands). */
describe('the Dockerfile', () => {
  it('has no `# syntax=` directive, which makes BuildKit fetch a frontend image before building', () => {
    expect(dockerfile).not.toMatch(/^#\s*syntax\s*=/im)
  })

  it('checks health with `v4gw healthcheck`, within a timeout that leaves room for the probe\'s 2 s', () => {
    expect(imageHealthcheck()).toEqual(['node', 'dist/cli.js', 'healthcheck'])
    const timeout = /^HEALTHCHECK .*--timeout=(\d+)s/m.exec(dockerfile)?.[1]
    expect(Number(timeout)).toBeGreaterThanOrEqual(3)
  })

  it('is multi-stage, ships production dependencies only, and runs as a user that is not root (SPEC 9)', () => {
    const stages = dockerStages()
    expect(stages.length).toBeGreaterThan(1)
    const final = stages.at(-1)?.instructions ?? []
    // No install in the image that runs: its node_modules come from a stage that installed without devDependencies.
    expect(final.filter((line) => /^RUN .*npm (ci|install|i)\b/.test(line))).toEqual([])
    const modulesFrom = final.map((line) => /^COPY --from=(\S+) \S*node_modules\b/.exec(line)?.[1]).filter((name) => name !== undefined)
    expect(modulesFrom).toHaveLength(1)
    const installs = stages.find((stage) => stage.name === modulesFrom[0])?.instructions.filter((line) => /^RUN .*npm ci\b/.test(line)) ?? []
    expect(installs.length).toBeGreaterThan(0)
    for (const install of installs) expect(install).toMatch(/--omit=dev\b/)
    const user = final.filter((line) => line.startsWith('USER ')).at(-1)?.slice('USER '.length).trim()
    expect(user).toBeDefined()
    expect(['root', '0', '0:0']).not.toContain(user)
  })

  it("binds the baked-in config's admin listener where V4GW_ADMIN_HOST says, loopback without it", async () => {
    const path = join(ROOT, 'config', 'gateway.yaml')
    expect((await loadConfig(path, {})).admin.host).toBe('127.0.0.1')
    expect((await loadConfig(path, { V4GW_ADMIN_HOST: '0.0.0.0' })).admin.host).toBe('0.0.0.0')
  })
})

describe('docker-compose.yml', () => {
  const compose = composeFile()
  const services = Object.entries(compose.services)
  /** Services built from this repository's Dockerfile, whose image HEALTHCHECK applies unless they set their own. */
  const built = new Set(services.filter(([, service]) => service.build !== undefined).map(([name]) => name))
  const dir = useTempDir('v4gw-compose-')

  it('starts a service only once what it depends on is healthy, and every such dependency has a health check', () => {
    const dependencies = services.flatMap(([name, service]) => {
      expect(Array.isArray(service.depends_on), `${name}: depends_on as a list waits only for the start`).toBe(false)
      return Object.entries(service.depends_on ?? {}).map(([dependency, { condition }]) => ({ name, dependency, condition }))
    })
    expect(dependencies.length).toBeGreaterThan(0)
    for (const { name, dependency, condition } of dependencies) {
      expect(condition, `${name} -> ${dependency}`).toBe('service_healthy')
      const target = compose.services[dependency]
      expect(target?.healthcheck !== undefined || built.has(dependency), `${dependency} has a health check`).toBe(true)
    }
  })

  it('pins every image it pulls to an exact version', () => {
    const pulled = services.filter(([name]) => !built.has(name)).map(([, service]) => service.image)
    expect(pulled).toEqual(expect.arrayContaining([expect.stringMatching(/^nginx:1\.27\.\d+-alpine$/), expect.stringMatching(/^valkey\/valkey:8\.\d+\.\d+$/)]))
    for (const image of pulled) expect(image).toMatch(/^[a-z0-9./-]+:\d+\.\d+\.\d+(-[a-z0-9.]+)?$/)
  })

  it('names the gateway config with V4GW_CONFIG, which the image HEALTHCHECK reads, not with --config', () => {
    const gateways = services.filter(([name, service]) => built.has(name) && service.configs?.some((config) => config.source === 'gateway'))
    expect(gateways.map(([name]) => name)).toEqual(['gateway-1', 'gateway-2'])
    for (const [name, service] of gateways) {
      expect(service.command ?? [], name).not.toContain('--config')
      expect(service.environment?.V4GW_CONFIG, name).toBe(service.configs?.find((config) => config.source === 'gateway')?.target)
    }
  })

  it('ships a gateway config that loads, with the admin listener off loopback and a token (SPEC 18)', async () => {
    // Compose reads `$$` as a literal `$`: the gateway sees its own placeholder.
    const content = (compose.configs.gateway?.content ?? '').replaceAll('$$', '$')
    const config = await loadConfig(await dir.write('compose-gateway.yaml', content), { V4GW_ADMIN_TOKEN: 'from-compose-environment' })
    expect(config.admin).toMatchObject({ host: '0.0.0.0', token: 'from-compose-environment' })
    expect(compose.services['gateway-1']?.environment?.V4GW_ADMIN_TOKEN).toMatch(/^\$\{V4GW_ADMIN_TOKEN:-.+\}$/)
  })
})
