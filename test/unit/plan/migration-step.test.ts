import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { clientBucket } from '../../../src/plan/client-bucket.js'
import { brownoutBucket } from '../../../src/plan/deprecation-step.js'
import { cameThroughFleet, decideMigration, withVia } from '../../../src/plan/migration-step.js'
import { isAllowedOverride, NO_STAGE_OVERRIDES, resolveEffectiveStage, type RouteMigration, type StageOverride, type StageOverrides } from '../../../src/tenancy/migration-policy.js'

/** SPEC 14's decision for one request, as a pure function. */

function route(stage: RouteMigration['stage'], percent = 0, allow: string[] = [], deny: string[] = []): RouteMigration {
  return { stage, stageFrom: 'tenant', canary: { percent, bucketBound: Math.round(percent * 100), allow: new Set(allow), deny: new Set(deny) } }
}

const ROUTE = 'POST /v1/runs/invoke'
const CLIENTS = Array.from({ length: 2_000 }, (_, index) => `fp:${index.toString(16).padStart(16, '0')}`)

function sideOf(configured: RouteMigration, clientId: string, tenant = 'acme'): string {
  return decideMigration(resolveEffectiveStage(configured, true, NO_STAGE_OVERRIDES, tenant, ROUTE, 0), configured, tenant, clientId, undefined, 0).side
}

describe('SPEC 14 canary by client', () => {
  it('uses SPEC 13 bucket formula with "canary" for "brownout": the same digest, another salt', () => {
    expect(clientBucket('brownout', 'acme', 'fp:0123456789abcdef')).toBe(brownoutBucket('acme', 'fp:0123456789abcdef'))
    // Pinned values: a change of the formula would move clients between sides on every replica.
    expect(clientBucket('canary', 'acme', 'fp:0123456789abcdef')).toBe(1604)
    expect(clientBucket('canary', 'acme', 'hdr:batch-job')).toBe(1917)
    expect(clientBucket('brownout', 'acme', 'fp:0123456789abcdef')).toBe(8108)
    expect(CLIENTS.map((client) => clientBucket('canary', 'acme', client)).every((bucket) => bucket >= 0 && bucket < 10_000)).toBe(true)
  })

  it('only adds clients to V4 when the percentage rises (monotone), never removes one', () => {
    let previous = new Set<string>()
    for (const percent of [0, 1, 5, 12.5, 25, 50, 75, 99.99, 100]) {
      const inCanary = new Set(CLIENTS.filter((client) => sideOf(route('canary', percent), client) === 'v4'))
      for (const client of previous) expect(inCanary.has(client)).toBe(true)
      previous = inCanary
    }
    expect(previous.size).toBe(CLIENTS.length)
  })

  it('selects about the share asked for', () => {
    const share = CLIENTS.filter((client) => sideOf(route('canary', 25), client) === 'v4').length / CLIENTS.length
    expect(share).toBeGreaterThan(0.2)
    expect(share).toBeLessThan(0.3)
  })

  it('puts a client on V4 exactly when SPEC 13\'s bucket salted "canary", computed here from its text, is below percent x 100', () => {
    // SPEC 13/14: (first 8 bytes of SHA-256("canary\0" + tenant + "\0" + client id), unsigned
    // big-endian) mod 10000. Nothing but tenant and client id goes in: not the route, not the
    // replica, so every route and every replica decide alike.
    const specBucket = (tenant: string, client: string): number => Number(createHash('sha256').update(`canary\0${tenant}\0${client}`).digest().readBigUInt64BE(0) % 10_000n)
    for (const percent of [0.01, 12.5, 40, 99.99]) {
      const configured = route('canary', percent)
      for (const client of CLIENTS.slice(0, 500)) expect(sideOf(configured, client), `${client} at ${percent} %`).toBe(specBucket('acme', client) < percent * 100 ? 'v4' : 'legacy')
    }
    // Another tenant buckets its clients on its own.
    const other = CLIENTS.slice(0, 500).filter((client) => sideOf(route('canary', 40), client, 'other') !== sideOf(route('canary', 40), client))
    expect(other.length).toBeGreaterThan(0)
    for (const client of other) expect(sideOf(route('canary', 40), client, 'other')).toBe(specBucket('other', client) < 4_000 ? 'v4' : 'legacy')
  })

  it('lets allow win over the bucket and deny over it, and says why', () => {
    const client = CLIENTS.find((id) => clientBucket('canary', 'acme', id) >= 5_000) as string
    const allowed = decideMigration({ stage: 'canary', source: 'config' }, route('canary', 0, [client]), 'acme', client, undefined, 0)
    expect(allowed).toMatchObject({ side: 'v4', canary: { listed: 'allow' } })
    const denied = decideMigration({ stage: 'canary', source: 'config' }, route('canary', 100, [], [client]), 'acme', client, undefined, 0)
    expect(denied).toMatchObject({ side: 'legacy', canary: { listed: 'deny' } })
    const bucketed = decideMigration({ stage: 'canary', source: 'config' }, route('canary', 50), 'acme', client, undefined, 0)
    expect(bucketed.canary?.bucket).toBe(clientBucket('canary', 'acme', client))
  })

  it('puts anonymous in the canary only at 100', () => {
    expect(sideOf(route('canary', 99.99), 'anonymous')).toBe('legacy')
    expect(sideOf(route('canary', 100), 'anonymous')).toBe('v4')
  })
})

describe('SPEC 14 stages and their sides', () => {
  it.each([
    ['legacy', 'legacy'],
    ['shadow', 'legacy'],
    ['translate', 'v4'],
    ['native-only', 'none']
  ] as const)('serves stage %s from %s', (stage, side) => {
    expect(sideOf(route(stage), 'fp:0000000000000001')).toBe(side)
  })

  it('marks stage shadow for SPEC 15 comparison', () => {
    expect(decideMigration({ stage: 'shadow', source: 'config' }, route('shadow'), 'acme', 'anonymous', undefined, 0).shadow).toBe(true)
  })

  it('lets a client exempt until later through native-only, as in translate', () => {
    const facts = decideMigration({ stage: 'native-only', source: 'config' }, route('native-only'), 'acme', 'fp:0000000000000001', Date.parse('2030-01-01T00:00:00Z'), Date.parse('2029-01-01T00:00:00Z'))
    expect(facts).toMatchObject({ side: 'v4', exemptUntil: '2030-01-01T00:00:00.000Z' })
    const expired = decideMigration({ stage: 'native-only', source: 'config' }, route('native-only'), 'acme', 'fp:0000000000000001', Date.parse('2030-01-01T00:00:00Z'), Date.parse('2031-01-01T00:00:00Z'))
    expect(expired.side).toBe('none')
  })
})

describe('SPEC 14 effective stage', () => {
  const override = (stage: RouteMigration['stage'], scope: string | null = null): StageOverride => ({ stage, route: scope, reason: 'rollback', until: '2099-01-01T00:00:00Z' })
  /** Overrides in force for tenant acme: the route's own and the tenant-wide one, either may be absent. */
  const inForce = (own: StageOverride | undefined, tenantWide: StageOverride | undefined): StageOverrides => ({
    inForce: (tenant, scope) => (tenant !== 'acme' ? undefined : scope === null ? tenantWide : scope === ROUTE ? own : undefined)
  })
  const effective = (configured: RouteMigration, hasLegacy: boolean, overrides: StageOverrides) => resolveEffectiveStage(configured, hasLegacy, overrides, 'acme', ROUTE, 0)

  it('is the configured stage without an override, from config', () => {
    expect(effective(route('canary'), true, NO_STAGE_OVERRIDES)).toEqual({ stage: 'canary', source: 'config' })
  })

  it('applies an override to an earlier or equal stage, and suspends one that would move forward or needs a legacy upstream that is gone', () => {
    expect(effective(route('canary'), true, inForce(undefined, override('shadow')))).toMatchObject({ stage: 'shadow', source: 'override' })
    expect(effective(route('shadow'), true, inForce(undefined, override('translate')))).toEqual({ stage: 'shadow', source: 'config' })
    expect(effective(route('translate'), false, inForce(override('legacy', ROUTE), undefined))).toEqual({ stage: 'translate', source: 'config' })
    expect(isAllowedOverride('native-only', 'translate', false)).toBe(true)
  })

  it('takes the route override before the tenant override, and the tenant override when the route one is suspended', () => {
    expect(effective(route('canary'), true, inForce(override('legacy', ROUTE), override('shadow')))).toMatchObject({ stage: 'legacy', override: { route: ROUTE } })
    // The route's override needs the legacy upstream, which is gone: the tenant's rollback to translate still holds.
    expect(effective(route('native-only'), false, inForce(override('legacy', ROUTE), override('translate')))).toMatchObject({ stage: 'translate', source: 'override', override: { route: null } })
    // The route's would move it forward: the tenant's serves.
    expect(effective(route('shadow'), true, inForce(override('canary', ROUTE), override('legacy')))).toMatchObject({ stage: 'legacy', source: 'override' })
    // Both suspended: the configured stage.
    expect(effective(route('shadow'), false, inForce(override('legacy', ROUTE), override('legacy')))).toEqual({ stage: 'shadow', source: 'config' })
    // Another tenant's overrides are not this one's.
    expect(resolveEffectiveStage(route('canary'), true, inForce(override('legacy', ROUTE), override('shadow')), 'other', ROUTE, 0)).toEqual({ stage: 'canary', source: 'config' })
  })
})

describe('SPEC 14 Via', () => {
  it('finds the fleet member in a Via list, whatever else is in it, and nothing in a look-alike', () => {
    expect(cameThroughFleet('1.1 proxy-a, 1.1 v4gw-abc123 (comment), HTTP/2 lb', 'v4gw-abc123')).toBe(true)
    expect(cameThroughFleet(['1.0 a', '1.1 v4gw-abc123'], 'v4gw-abc123')).toBe(true)
    expect(cameThroughFleet('1.1 v4gw-abc1234', 'v4gw-abc123')).toBe(false)
    expect(cameThroughFleet('1.1 proxy (via v4gw-abc123)', 'v4gw-abc123')).toBe(false)
    expect(cameThroughFleet(undefined, 'v4gw-abc123')).toBe(false)
  })

  it('appends the member to the incoming list (RFC 9110 7.6.3)', () => {
    expect(withVia(undefined, '1.1 v4gw-x')).toBe('1.1 v4gw-x')
    expect(withVia('1.0 a', '1.1 v4gw-x')).toBe('1.0 a, 1.1 v4gw-x')
  })
})
