import { describe, expect, it } from 'vitest'
import { LEGACY_V1_ROUTES, legacyRouteSchema } from '../../../src/config/schema.js'
import { buildRewrittenPath, compileRoutes, matchRoute, type CompiledRoute } from '../../../src/legacy/route-table.js'

function routes(raw: readonly unknown[]) {
  return compileRoutes(legacyRouteSchema.array().parse(raw))
}

const LEGACY_V1 = routes(LEGACY_V1_ROUTES)

describe('matchRoute on the legacy-v1 table', () => {
  it('matches POST /v1/headless/runs to the execute action with no params', () => {
    const match = matchRoute(LEGACY_V1, 'POST', '/v1/headless/runs')
    expect(match?.route.action).toBe('execute')
    expect(match?.params).toEqual({})
  })

  it('matches POST /v1/runs/invoke to session-execute keyed by body /stateId', () => {
    const match = matchRoute(LEGACY_V1, 'POST', '/v1/runs/invoke')
    expect(match?.route).toMatchObject({ action: 'session-execute', stateKey: 'body:/stateId', path: '/v1/runs/invoke' })
  })

  it('matches POST /v1/runs/:runId/invoke and reads runId from the path', () => {
    const match = matchRoute(LEGACY_V1, 'POST', '/v1/runs/run-42/invoke')
    expect(match?.route).toMatchObject({ action: 'session-execute', stateKey: 'param:runId', path: '/v1/runs/:runId/invoke' })
    expect(match?.params).toEqual({ runId: 'run-42' })
  })

  it('decodes percent-encoded parameters, an encoded slash included', () => {
    expect(matchRoute(LEGACY_V1, 'POST', '/v1/runs/a%20b%2Fc%C3%A9/invoke')?.params).toEqual({ runId: 'a b/cé' })
  })

  it('matches the route with a parameter that is not percent-encoded UTF-8, naming it (the translation refuses it)', () => {
    for (const raw of ['%E0%A4%A', '%zz', '%FF']) {
      expect(matchRoute(LEGACY_V1, 'POST', `/v1/runs/${raw}/invoke`)).toMatchObject({ route: { path: '/v1/runs/:runId/invoke' }, params: { runId: raw }, undecodable: ['runId'] })
    }
    expect(matchRoute(LEGACY_V1, 'POST', '/v1/runs/run-1/invoke')).not.toHaveProperty('undecodable')
  })

  it('names a parameter the translation does not read too (its raw text in params), which only the planner weighs', () => {
    const custom = routes([{ method: 'POST', path: '/v0/jobs/:id', action: 'execute' }])
    expect(matchRoute(custom, 'POST', '/v0/jobs/%FF')).toMatchObject({ params: { id: '%FF' }, undecodable: ['id'] })
    expect(custom[0]?.readParams.has('id')).toBe(false)
  })

  it('rewrites with an undecodable parameter’s raw text, not encoded again (a successor link names the same path)', () => {
    const [proxy] = routes([{ method: 'GET', path: '/v1/policies/:id/:rev', action: 'proxy', rewrite: '/v4/policies/:id/:rev' }])
    const match = matchRoute([proxy as CompiledRoute], 'GET', '/v1/policies/%FF/%FE')
    expect(match?.undecodable).toEqual(['id', 'rev'])
    expect(buildRewrittenPath(proxy as CompiledRoute, match?.params ?? {}, match?.undecodable)).toBe('/v4/policies/%FF/%FE')
    expect(buildRewrittenPath(proxy as CompiledRoute, { id: 'a/b', rev: '1' })).toBe('/v4/policies/a%2Fb/1')
  })

  it('does not match a path with extra segments', () => {
    expect(matchRoute(LEGACY_V1, 'POST', '/v1/headless/runs/extra')).toBeUndefined()
    expect(matchRoute(LEGACY_V1, 'POST', '/v1/runs/run-1/invoke/extra')).toBeUndefined()
    expect(matchRoute(LEGACY_V1, 'POST', '/prefix/v1/headless/runs')).toBeUndefined()
  })

  it('does not match a path with a trailing slash', () => {
    expect(matchRoute(LEGACY_V1, 'POST', '/v1/headless/runs/')).toBeUndefined()
  })

  it('does not match an empty parameter segment', () => {
    expect(matchRoute(LEGACY_V1, 'POST', '/v1/runs//invoke')).toBeUndefined()
  })

  it('does not match another method on a legacy path', () => {
    expect(matchRoute(LEGACY_V1, 'GET', '/v1/headless/runs')).toBeUndefined()
    expect(matchRoute(LEGACY_V1, 'PUT', '/v1/runs/run-1/invoke')).toBeUndefined()
  })

  it('compares literal segments exactly, without decoding them', () => {
    expect(matchRoute(LEGACY_V1, 'POST', '/v1/headless%2Fruns')).toBeUndefined()
    expect(matchRoute(LEGACY_V1, 'POST', '/V1/headless/runs')).toBeUndefined()
  })

  it('does not match a V4 path', () => {
    expect(matchRoute(LEGACY_V1, 'POST', '/v4/execute')).toBeUndefined()
  })
})

describe('matchRoute on a custom table', () => {
  const custom = routes([
    { method: 'post', path: '/v0/jobs/:jobId', action: 'session-execute', stateKey: 'param:jobId' },
    { method: 'POST', path: '/v0/jobs/special', action: 'execute' },
    { method: 'GET', path: '/v0/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id' }
  ])

  it('upper-cases a configured method and matches it', () => {
    expect(matchRoute(custom, 'POST', '/v0/jobs/job-1')?.params).toEqual({ jobId: 'job-1' })
  })

  it('takes the first route that matches, in table order', () => {
    expect(matchRoute(custom, 'POST', '/v0/jobs/special')?.route.action).toBe('session-execute')
  })

  // A route without parameters is matched by one compare of its path: order still decides.
  it('takes a route without parameters before a later one with them, and only for its own path', () => {
    const staticFirst = routes([
      { method: 'POST', path: '/v0/jobs/special', action: 'execute' },
      { method: 'POST', path: '/v0/jobs/:jobId', action: 'session-execute', stateKey: 'param:jobId' },
      { method: 'POST', path: '/', action: 'execute' }
    ])
    expect(matchRoute(staticFirst, 'POST', '/v0/jobs/special')).toMatchObject({ route: { action: 'execute', path: '/v0/jobs/special' }, params: {} })
    expect(matchRoute(staticFirst, 'POST', '/v0/jobs/specia')?.params).toEqual({ jobId: 'specia' })
    expect(matchRoute(staticFirst, 'POST', '/v0/jobs/special2')?.params).toEqual({ jobId: 'special2' })
    expect(matchRoute(staticFirst, 'POST', '/v0/jobs/Special')?.params).toEqual({ jobId: 'Special' })
    expect(matchRoute(staticFirst, 'POST', '/v0/jobs/special/')).toBeUndefined()
    expect(matchRoute(staticFirst, 'GET', '/v0/jobs/special')).toBeUndefined()
    expect(matchRoute(staticFirst, 'POST', '/')?.route.path).toBe('/')
    expect(matchRoute(staticFirst, 'POST', '//')).toBeUndefined()
  })

  it('hands out a match that cannot be changed, since every request of the route shares it', () => {
    const match = matchRoute(LEGACY_V1, 'POST', '/v1/headless/runs')
    expect(match).toBe(matchRoute(LEGACY_V1, 'POST', '/v1/headless/runs'))
    expect(Object.isFrozen(match)).toBe(true)
    expect(Object.isFrozen(match?.params)).toBe(true)
  })

  it('keeps each route action, state key and rewrite', () => {
    const match = matchRoute(custom, 'GET', '/v0/policies/pol-1')
    expect(match?.route).toMatchObject({ method: 'GET', action: 'proxy', rewrite: '/v4/policies/:id', stateKey: undefined })
  })
})

describe('buildRewrittenPath', () => {
  const [proxy] = routes([{ method: 'GET', path: '/v1/policies/:id', action: 'proxy', rewrite: '/v4/policies/:id' }])

  it('fills the :name parameters of the rewrite path', () => {
    expect(buildRewrittenPath(proxy!, { id: 'pol-1' })).toBe('/v4/policies/pol-1')
  })

  it('percent-encodes a decoded parameter again so that it stays one segment', () => {
    expect(buildRewrittenPath(proxy!, { id: 'a/b c' })).toBe('/v4/policies/a%2Fb%20c')
  })

  it('keeps a rewrite without parameters as it is', () => {
    const [plain] = routes([{ method: 'GET', path: '/v1/policies', action: 'proxy', rewrite: '/v4/policies' }])
    expect(buildRewrittenPath(plain!, {})).toBe('/v4/policies')
  })
})
