import { z } from 'zod'
import { percentSchema } from './percent.js'

/**
 * SPEC 15's `shadow` block: `tenants.T.migration.shadow`, and per route
 * `migration.routes["METHOD /path"].shadow` merged over it key by key (SPEC 14; `null` removes the
 * tenant's block for that route). Every key is optional at both levels; what neither sets is
 * SHADOW_DEFAULTS.
 */
export const SHADOW_DEFAULTS = Object.freeze({
  percent: 100,
  upstream: 'staging' as 'staging' | 'production',
  allowProductionSideEffects: false,
  forwardCredentials: false,
  timeoutMs: 5_000,
  maxInFlight: 100,
  maxBodyBytes: 1_048_576,
  maxSessions: 1_000,
  ignore: Object.freeze([]) as readonly string[]
})

export type ShadowSettings = { -readonly [K in keyof typeof SHADOW_DEFAULTS]: (typeof SHADOW_DEFAULTS)[K] }

// As `${N:-5000}` and `${FLAG:-false}` leave them: text that reads as a number or a boolean counts as one.
const whole = (schema: z.ZodNumber) => z.preprocess((value) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value), schema)
const flag = () => z.preprocess((value) => (value === 'true' ? true : value === 'false' ? false : value), z.boolean())
// A timer Node keeps: at most 2^31 - 1 ms.
const timerMs = whole(z.number().int().min(1).max(2_147_483_647))
const percent = percentSchema
// RFC 6901, with `*` read as any one segment (SPEC 15).
const ignorePointer = z.string().regex(/^(\/([^~]|~[01])*)*$/, 'expected a JSON pointer such as /output/generatedAt (* stands for any one segment)')

const routeShape = {
  percent: percent.optional(),
  upstream: z.enum(['staging', 'production']).optional(),
  allowProductionSideEffects: flag().optional(),
  forwardCredentials: flag().optional(),
  timeoutMs: timerMs.optional(),
  maxInFlight: whole(z.number().int().positive()).optional(),
  maxBodyBytes: whole(z.number().int().positive()).optional(),
  ignore: z.array(ignorePointer).optional()
}

/** The tenant's block; `maxSessions` is the tenant's shadow session map, so it is set here only. */
export const shadowConfigSchema = z.strictObject({ ...routeShape, maxSessions: whole(z.number().int().positive()).optional() }).nullable()

/** A route's block, merged over the tenant's key by key; a key set to `null` takes the tenant's value away (the default). */
export const routeShadowConfigSchema = z
  .strictObject({
    percent: percent.nullable().optional(),
    upstream: z.enum(['staging', 'production']).nullable().optional(),
    allowProductionSideEffects: flag().nullable().optional(),
    forwardCredentials: flag().nullable().optional(),
    timeoutMs: timerMs.nullable().optional(),
    maxInFlight: whole(z.number().int().positive()).nullable().optional(),
    maxBodyBytes: whole(z.number().int().positive()).nullable().optional(),
    ignore: z.array(ignorePointer).nullable().optional()
  })
  .nullable()

export type ShadowConfig = NonNullable<z.output<typeof shadowConfigSchema>>
export type RouteShadowConfig = NonNullable<z.output<typeof routeShadowConfigSchema>>

/** The defaults, then the tenant's block, then the route's (SPEC 14's merge; a route's `null` drops the tenant's). */
export function effectiveShadow(tenant: ShadowConfig | null | undefined, route: RouteShadowConfig | null | undefined): ShadowSettings {
  const merged: Record<string, unknown> = { ...SHADOW_DEFAULTS }
  const layers = route === null ? [] : [tenant, route]
  for (const layer of layers) {
    if (layer == null) continue
    // A route's `null` for a key: the tenant's value goes, the default stands.
    for (const [key, value] of Object.entries(layer)) if (value !== undefined) merged[key] = value === null ? SHADOW_DEFAULTS[key as keyof typeof SHADOW_DEFAULTS] : value
  }
  if (tenant != null && tenant.maxSessions !== undefined) merged.maxSessions = tenant.maxSessions
  return merged as ShadowSettings
}

/** What checkShadow reads of a parsed tenant. */
export interface ShadowCheckedTenant {
  upstream: { staging: string; production: string | null; target: 'staging' | 'production' }
  legacy: { routes: readonly { method: string; path: string; action: string }[] }
  migration: { stage?: string | undefined; shadow?: ShadowConfig | null | undefined; routes: Record<string, { stage?: string | null | undefined; shadow?: RouteShadowConfig | null | undefined }> }
}

export interface ShadowProblem {
  path: (string | number)[]
  message: string
}

/**
 * SPEC 15's checks at load, each with the path of the key that causes it (the route's when the
 * route sets it, else the tenant's): `upstream: production` without `allowProductionSideEffects:
 * true` or without a production upstream; a `shadow` block on a proxy route (only execute and
 * session-execute are compared); a shadow upstream `embedded` that the tenant's target is not
 * (the embedded simulator runs for targets only). Only routes that are in stage `shadow` or have
 * shadow settings (the tenant's or their own) are checked: a tenant that never shadows needs none.
 */
export function shadowProblems(tenant: ShadowCheckedTenant, embedded: string): ShadowProblem[] {
  const problems: ShadowProblem[] = []
  const tenantShadow = tenant.migration.shadow
  const seen = new Set<string>()
  const check = (settings: ShadowSettings, path: (string | number)[], routeSets: (key: string) => boolean) => {
    const at = (key: string) => (routeSets(key) ? [...path, key] : ['migration', 'shadow', key])
    if (settings.upstream === 'production' && !settings.allowProductionSideEffects) {
      problems.push({ path: at('upstream'), message: 'upstream: production sends shadow calls to the production backend, where they have side effects: set allowProductionSideEffects: true to mean it' })
    }
    if (settings.upstream === 'production' && tenant.upstream.production === null) {
      problems.push({ path: at('upstream'), message: 'upstream: production needs tenants.T.upstream.production' })
    }
    const url = settings.upstream === 'production' ? tenant.upstream.production : tenant.upstream.staging
    const targetUrl = tenant.upstream.target === 'production' ? tenant.upstream.production : tenant.upstream.staging
    if (url === embedded && targetUrl !== embedded) {
      problems.push({ path: at('upstream'), message: 'the shadow upstream is embedded, but the embedded simulator runs only as a tenant\'s target: set upstream.target to it, or point the shadow at a URL' })
    }
  }
  for (const route of tenant.legacy.routes) {
    const label = `${route.method} ${route.path}`
    const own = tenant.migration.routes[label]?.shadow
    if (route.action === 'proxy') {
      if (own !== undefined && own !== null) problems.push({ path: ['migration', 'routes', label, 'shadow'], message: `${label} is a proxy route: SPEC 15 compares execute and session-execute routes only` })
      continue
    }
    const stage = tenant.migration.routes[label]?.stage !== undefined ? tenant.migration.routes[label]?.stage : tenant.migration.stage
    if (stage !== 'shadow' && tenantShadow == null && own == null) continue
    const settings = effectiveShadow(tenantShadow, own)
    const before = problems.length
    check(settings, ['migration', 'routes', label, 'shadow'], (key) => own != null && (own as Record<string, unknown>)[key] !== undefined)
    // A problem of the tenant's block is said once, not once per route that inherits it.
    const added = problems.splice(before)
    for (const problem of added) {
      const key = `${problem.path.join('\u0000')}\u0000${problem.message}`
      if (!seen.has(key)) {
        seen.add(key)
        problems.push(problem)
      }
    }
  }
  return problems
}
