import { z } from 'zod'
import { percentSchema } from './percent.js'
import { isPlainObject } from '../util/is-plain-object.js'
import { normalizeHost } from '../util/normalize-host.js'
import { canonicalHost, isValidHost } from '../util/host-syntax.js'
import { anyCase } from './json-schema-patterns.js'
import { DEFAULT_MIN_NOTICE_MS, deprecationProblems, effectiveDeprecation, type DeprecationConfig, type RouteDeprecationConfig } from './deprecation.js'
import { absent, present, whenKeyIs } from './json-schema-conditions.js'
import { routeShadowConfigSchema, shadowConfigSchema, shadowProblems } from './shadow-config.js'
import { anyHttpUrl, EMBEDDED_UPSTREAM, otlpEndpointUrl, parseUrl, publicPageUrl, redisUrl, upstreamUrl } from './url-schemas.js'

export { EMBEDDED_UPSTREAM } from './url-schemas.js'

/**
 * The config file's schema (SPEC 8). Types come from here (`z.output`), never written twice.
 * Every object is strict: an unknown key is a typo that would otherwise be ignored silently.
 */

/** RFC 6901 JSON pointer; "" is the whole document. */
const jsonPointer = z.string().regex(/^(\/([^~]|~[01])*)*$/, 'expected a JSON pointer such as /input')

const routePath = z
  .string()
  .regex(/^(\/[A-Za-z0-9._~!$&'()*+,;=@-]+|\/:[A-Za-z_][A-Za-z0-9_]*)+$|^\/$/, 'expected a path such as /v1/runs/:runId/invoke')

const stateKey = z
  .string()
  .regex(/^(param:[A-Za-z_][A-Za-z0-9_]*|header:[A-Za-z0-9-]+|body:(\/([^~]|~[01])*)+)$/,
    'expected param:NAME, header:NAME or body:/json/pointer')

const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'] as const

const httpMethod = z
  .string()
  .transform((value) => value.toUpperCase())
  .pipe(z.enum(HTTP_METHODS))
  .meta({ pattern: `^(?:${HTTP_METHODS.map(anyCase).join('|')})$` })

export const legacyActionSchema = z.enum(['execute', 'session-execute', 'proxy'])

function paramNames(path: string): string[] {
  return path.split('/').filter((segment) => segment.startsWith(':')).map((segment) => segment.slice(1))
}

export const legacyRouteSchema = z
  .strictObject({
    method: httpMethod,
    path: routePath,
    action: legacyActionSchema,
    stateKey: stateKey.optional(),
    rewrite: routePath.optional()
  })
  .superRefine((route, ctx) => {
    const params = new Set(paramNames(route.path))
    if (route.action === 'proxy' && route.rewrite === undefined) {
      ctx.addIssue({ code: 'custom', path: ['rewrite'], message: 'a proxy route needs rewrite, the V4 path it goes to' })
    }
    if (route.action !== 'proxy' && route.rewrite !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['rewrite'], message: 'rewrite applies to proxy routes only' })
    }
    if (route.action !== 'session-execute' && route.stateKey !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['stateKey'], message: 'stateKey applies to session-execute routes only' })
    }
    for (const name of route.rewrite === undefined ? [] : paramNames(route.rewrite)) {
      if (!params.has(name)) ctx.addIssue({ code: 'custom', path: ['rewrite'], message: `parameter :${name} is not in path` })
    }
    // SPEC 4: the raw token is never a key. A state key read from a credential header would be one.
    if (route.stateKey?.startsWith('header:') === true && (CREDENTIAL_HEADERS as readonly string[]).includes(route.stateKey.slice('header:'.length).toLowerCase())) {
      ctx.addIssue({ code: 'custom', path: ['stateKey'], message: `${route.stateKey} is a header that carries a credential (${CREDENTIAL_HEADERS.join(', ')}): the raw token would be a session-map key; name a header of its own, a path parameter or a body pointer` })
    }
    if (route.stateKey?.startsWith('param:') === true && !params.has(route.stateKey.slice('param:'.length))) {
      ctx.addIssue({ code: 'custom', path: ['stateKey'], message: `parameter :${route.stateKey.slice('param:'.length)} is not in path` })
    }
  })
  // The checks above that a JSON Schema can say; the parameters named in path are beyond it.
  .meta({
    allOf: [
      whenKeyIs('action', ['proxy'], present('rewrite')),
      whenKeyIs('action', ['execute', 'session-execute'], absent('rewrite')),
      whenKeyIs('action', ['execute', 'proxy'], absent('stateKey'))
    ]
  })

/** The default route table of every tenant that has none (SPEC 4). */
export const LEGACY_V1_ROUTES = [
  { method: 'POST', path: '/v1/headless/runs', action: 'execute' },
  { method: 'POST', path: '/v1/runs/invoke', action: 'session-execute', stateKey: 'body:/stateId' },
  { method: 'POST', path: '/v1/runs/:runId/invoke', action: 'session-execute', stateKey: 'param:runId' }
] as const

/** Where each legacy field is read from in the request body (SPEC 4, `legacy.fields`). */
export const legacyFieldsSchema = z.strictObject({
  input: jsonPointer.default('/input'),
  policy: jsonPointer.default('/policy'),
  route: jsonPointer.default('/route'),
  risk: jsonPointer.default('/risk'),
  state: jsonPointer.default('/state'),
  stateId: jsonPointer.default('/stateId')
})

/** `${PORT:-8080}` substitutes a string: whole-number strings count as numbers. */
function wholeNumber(schema: z.ZodNumber) {
  return z.preprocess((value) => (typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value), schema)
}

/** `${BAGGAGE:-false}` substitutes a string too: "true" and "false" count as booleans. */
function booleanAllowingText() {
  return z.preprocess((value) => (value === 'true' ? true : value === 'false' ? false : value), z.boolean())
}

const port = wholeNumber(z.number().int().min(0).max(65535))

/** A ratio from 0 to 1 (SPEC 17 `sampleRatio`); as text too, as `${RATIO:-0.01}` leaves it. */
const ratio = z.union([z.number().min(0).max(1), z.string().regex(/^(?:0(?:\.\d+)?|1(?:\.0+)?|\.\d+)$/).transform(Number)], { error: 'expected a number from 0 to 1' })
const positiveInt = wholeNumber(z.number().int().positive())

const instant = z.iso.datetime({ offset: true })

/** SPEC 12's client ids: `fp:` and `hdr#` with 16 lowercase hex digits, `hdr:` with 1-128 safe characters, or `anonymous`. */
const clientId = z
  .string()
  .regex(/^(?:fp:[0-9a-f]{16}|hdr:[A-Za-z0-9._:-]{1,128}|hdr#[0-9a-f]{16}|anonymous)$/, 'expected a client id: fp:<16 hex digits>, hdr:<id>, hdr#<16 hex digits> or anonymous')

/** SPEC 13: a percentage of clients, 0-100, with two decimals at most (the bucket is 1/10000). */
const clientPercent = percentSchema

const brownoutsSchema = z.strictObject({
  windows: z.array(z.strictObject({ start: instant, end: instant })).default([]),
  escalation: z
    .strictObject({ first: instant, everyMs: positiveInt, durationsMs: z.array(positiveInt).min(1, 'durationsMs needs at least one duration') })
    .nullable()
    .default(null),
  clients: clientPercent.default(100),
  minNoticeMs: wholeNumber(z.number().int().min(0)).default(DEFAULT_MIN_NOTICE_MS)
})

/**
 * SPEC 12: the headers a `header:NAME` client-id source may not name, as they carry a credential:
 * SPEC 5's credential headers, `cookie` and `proxy-authorization` (the query credential is
 * checked against `credentials.queryParam` with the rest of the config).
 */
export const CREDENTIAL_HEADERS = ['authorization', 'x-session-token', 'x-api-key', 'x-service-api-key', 'cookie', 'proxy-authorization'] as const

/** SPEC 12: one source of `clients.key`, `credential` or `header:NAME` (the name lower-cased). */
const clientKeySource = z
  .string()
  .regex(
    new RegExp(`^(?:credential|header:(?!(?:${CREDENTIAL_HEADERS.map(anyCase).join('|')})$)[A-Za-z0-9-]+)$`),
    `expected credential or header:NAME, where NAME is not a header that carries a credential (${CREDENTIAL_HEADERS.join(', ')})`
  )
  .transform((source) => (source === 'credential' ? source : `header:${source.slice('header:'.length).toLowerCase()}`))

/** SPEC 12's label of a client: a name, or a name and its owner. */
const clientLabel = z.union([z.string().min(1), z.strictObject({ name: z.string().min(1), owner: z.string().min(1).nullable().default(null) })])

/** SPEC 12: how a tenant's legacy clients are identified and named. */
const clientsSchema = z
  .strictObject({
    key: z
      .array(clientKeySource)
      .min(1, 'at least one source: credential, header:NAME')
      .default(['credential'])
      .superRefine((sources, ctx) => {
        sources.forEach((source, index) => {
          if (sources.indexOf(source) !== index) ctx.addIssue({ code: 'custom', path: [index], message: `${source} is listed twice` })
        })
      }),
    labels: z.record(clientId, clientLabel).default({}),
    // SPEC 12's bounds of the client registry: clients kept per legacy route (the least recently seen evicted), and days kept.
    maxPerRoute: wholeNumber(z.number().int().min(1).max(1_000_000)).default(10_000),
    retentionDays: wholeNumber(z.number().int().min(1).max(3_650)).default(90)
  })
  .prefault({})

const exemptSchema = z.array(z.strictObject({ client: clientId, until: instant, reason: z.string().min(1).optional() }))

/** SPEC 13's deprecation of a tenant: `date` required, the rest with defaults. */
const deprecationSchema = z
  .strictObject({
    date: instant,
    sunset: instant.optional(),
    link: publicPageUrl.optional(),
    sunsetLink: publicPageUrl.optional(),
    successor: booleanAllowingText().default(true),
    afterSunset: z.enum(['serve', 'gone']).default('serve'),
    brownouts: brownoutsSchema.nullable().default(null),
    exempt: exemptSchema.default([])
  })
  .nullable()

/**
 * A route's entry, merged over the tenant's key by key (SPEC 14): no defaults, so what it leaves
 * out is the tenant's; a key set to `null` removes the tenant's value for the route (the key's
 * default, or none). `date` cannot be removed: a deprecation has one.
 */
const routeDeprecationSchema = z
  .strictObject({
    date: instant.optional(),
    sunset: instant.nullable().optional(),
    link: publicPageUrl.nullable().optional(),
    sunsetLink: publicPageUrl.nullable().optional(),
    successor: booleanAllowingText().nullable().optional(),
    afterSunset: z.enum(['serve', 'gone']).nullable().optional(),
    brownouts: brownoutsSchema.nullable().optional(),
    exempt: exemptSchema.nullable().optional()
  })
  .nullable()

/**
 * SPEC 16: the headers the gateway sets on a V4 call itself (SPEC 14's `Via` among them), that
 * carry a credential, or that are the connection's (RFC 9110 7.6.1, `expect`): a
 * `forwardHeader` naming one would replace it, or have undici refuse every keyed call.
 */
const RESERVED_CALL_HEADERS = [...CREDENTIAL_HEADERS, 'content-type', 'content-length', 'content-encoding', 'transfer-encoding', 'accept', 'accept-encoding', 'host', 'connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'expect', 'via', 'user-agent', 'x-request-id', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'traceparent', 'tracestate', 'baggage'] as const

const idempotencyHeader = z.string().regex(/^[A-Za-z0-9-]+$/, 'expected an HTTP header name').transform((name) => name.toLowerCase())
const forwardHeader = z
  .string()
  .regex(new RegExp(`^(?!(?:${RESERVED_CALL_HEADERS.map(anyCase).join('|')})$)[A-Za-z0-9-]+$`), `expected an HTTP header name that the gateway does not set on a V4 call itself (${RESERVED_CALL_HEADERS.join(', ')})`)
  .transform((name) => name.toLowerCase())
// waitMs sets a timer: Node runs one set beyond 2^31 - 1 ms after 1 ms.
const idempotencyWaitMs = wholeNumber(z.number().int().min(0).max(2_147_483_647))

/** SPEC 16's `legacy.idempotency` of a tenant, every key with its default. */
const idempotencySchema = z
  .strictObject({
    keyHeader: idempotencyHeader.default('idempotency-key'),
    ttlMs: positiveInt.default(86_400_000),
    waitMs: idempotencyWaitMs.default(10_000),
    maxBodyBytes: wholeNumber(z.number().int().min(0)).default(1_048_576),
    maxEntries: positiveInt.default(10_000),
    maxBytes: positiveInt.default(67_108_864),
    forwardHeader: forwardHeader.nullable().default(null)
  })
  .nullable()

/**
 * A route's entry, merged over the tenant's key by key (as SPEC 14 merges deprecation); null turns
 * it off for the route, and a key set to null takes the tenant's value away (SPEC 16's default).
 * `forwardHeader`'s default is null: there the two readings agree.
 */
const routeIdempotencySchema = z
  .strictObject({
    keyHeader: idempotencyHeader.nullable().optional(),
    ttlMs: positiveInt.nullable().optional(),
    waitMs: idempotencyWaitMs.nullable().optional(),
    maxBodyBytes: wholeNumber(z.number().int().min(0)).nullable().optional(),
    maxEntries: positiveInt.nullable().optional(),
    maxBytes: positiveInt.nullable().optional(),
    forwardHeader: forwardHeader.nullable().optional()
  })
  .nullable()

/** SPEC 14's stages, in their order: an override may only move a route to an earlier one. */
export const MIGRATION_STAGES = ['legacy', 'shadow', 'canary', 'translate', 'native-only'] as const
export const migrationStageSchema = z.enum(MIGRATION_STAGES)
/** SPEC 14: the stages in which `upstream.legacy` serves some or all requests. */
export const STAGES_NEEDING_LEGACY: ReadonlySet<string> = new Set(['legacy', 'shadow', 'canary'])

/** SPEC 14's canary of a tenant: who the translation serves while the rest stays on the legacy upstream. */
const canarySchema = z
  .strictObject({
    percent: clientPercent.default(0),
    allow: z.array(clientId).default([]),
    deny: z.array(clientId).default([])
  })
  .nullable()

/** A route's canary, merged over the tenant's key by key (SPEC 14): what it leaves out is the tenant's; `null` removes the tenant's value (0, no list). */
const routeCanarySchema = z
  .strictObject({
    percent: clientPercent.nullable().optional(),
    allow: z.array(clientId).nullable().optional(),
    deny: z.array(clientId).nullable().optional()
  })
  .nullable()

const tenantObject = z.strictObject({
  upstream: z
    .strictObject({
      staging: upstreamUrl,
      production: upstreamUrl.nullable().default(null),
      target: z.enum(['staging', 'production']).default('staging'),
      // SPEC 14: the old backend that still serves legacy routes in stages legacy, shadow and canary.
      legacy: upstreamUrl.nullable().optional()
    })
    .superRefine((upstream, ctx) => {
      if (upstream.target === 'production' && upstream.production === null) {
        ctx.addIssue({ code: 'custom', path: ['production'], message: 'target is production but no production upstream is set' })
      }
    })
    .meta(whenKeyIs('target', ['production'], present('production', { not: { type: 'null' } }))),
  legacy: z
    .strictObject({
      routes: z.array(legacyRouteSchema).default(() => LEGACY_V1_ROUTES.map((route) => ({ ...route }))),
      fields: legacyFieldsSchema.prefault({}),
      unknownFields: z.enum(['keep', 'drop']).default('keep'),
      responseFields: z.array(z.strictObject({ from: jsonPointer, to: jsonPointer.min(1) })).default([]),
      deprecation: deprecationSchema.default(null),
      idempotency: idempotencySchema.default(null)
    })
    .prefault({}),
  // SPEC 14: the tenant's stage and canary, and per route `stage`, `canary`, `deprecation` (SPEC 13)
  // and `idempotency` (SPEC 16), each merged over the tenant's. No default stage here: a tenant that
  // writes none is in `translate` and, without `upstream.legacy`, does not use stages at all.
  migration: z
    .strictObject({
      stage: migrationStageSchema.optional(),
      canary: canarySchema.optional(),
      // SPEC 15: how stage shadow compares (config/shadow-config.ts).
      shadow: shadowConfigSchema.optional(),
      routes: z
        .record(
          z.string().min(1),
          z.strictObject({
            stage: migrationStageSchema.nullable().optional(),
            canary: routeCanarySchema.optional(),
            deprecation: routeDeprecationSchema.optional(),
            idempotency: routeIdempotencySchema.optional(),
            shadow: routeShadowConfigSchema.optional()
          })
        )
        .default({})
    })
    .prefault({}),
  clients: clientsSchema,
  fallback: z.enum(['reject', 'proxy']).default('reject')
})

export const tenantSchema = tenantObject.superRefine(checkDeprecations)

/**
 * A route table in which every route can be matched, and none takes native traffic (SPEC 2: a
 * path under `/v4/` is streamed unchanged; legacy routes are matched first, so one that matches
 * such a path would rewrite it). Routes match in order, the first that fits wins
 * (legacy/route-table.ts): one listed after a route of its method that fits every path it does
 * (each segment a parameter or the same) is never matched, and its settings never apply.
 */
function checkRouteTable(routes: readonly z.output<typeof legacyRouteSchema>[], ctx: z.RefinementCtx): void {
  const segmentsOf = (path: string): string[] => path.split('/').slice(1)
  routes.forEach((route, index) => {
    const segments = segmentsOf(route.path)
    const first = segments[0] as string
    if (segments.length > 1 && (first === 'v4' || first.startsWith(':'))) {
      ctx.addIssue({ code: 'custom', path: ['legacy', 'routes', index, 'path'], message: `${route.path} would match native /v4/… requests, which are streamed unchanged (SPEC 2): a legacy route starts with a segment of its own` })
    }
    const earlier = routes.findIndex((other, at) => at < index && other.method === route.method && fitsEveryPath(segmentsOf(other.path), segments))
    if (earlier !== -1) {
      const shadowing = routes[earlier] as z.output<typeof legacyRouteSchema>
      ctx.addIssue({ code: 'custom', path: ['legacy', 'routes', index], message: `never matched: routes.${earlier} (${shadowing.method} ${shadowing.path}) comes first and matches every request this route would` })
    }
  })
}

/** Whether a route of `first`'s segments matches every path one of `later`'s does. */
function fitsEveryPath(first: readonly string[], later: readonly string[]): boolean {
  return first.length === later.length && first.every((segment, index) => segment.startsWith(':') || segment === later[index])
}

/** SPEC 13 validation at load, for the tenant's deprecation and each route's effective one (SPEC 14: route keys name configured routes). */
function checkDeprecations(tenant: z.output<typeof tenantObject>, ctx: z.RefinementCtx): void {
  const tenantDeprecation = tenant.legacy.deprecation
  if (tenantDeprecation !== null) {
    for (const problem of deprecationProblems(tenantDeprecation)) ctx.addIssue({ code: 'custom', path: ['legacy', 'deprecation', ...problem.path], message: problem.message })
  }
  checkRouteTable(tenant.legacy.routes, ctx)
  checkClientIdKinds(tenant, ctx)
  checkMigration(tenant, ctx)
  for (const problem of shadowProblems(tenant, EMBEDDED_UPSTREAM)) ctx.addIssue({ code: 'custom', path: problem.path, message: problem.message })
  const labels = new Set(tenant.legacy.routes.map((route) => `${route.method} ${route.path}`))
  for (const [key, entry] of Object.entries(tenant.migration.routes)) {
    if (!labels.has(key)) {
      ctx.addIssue({ code: 'custom', path: ['migration', 'routes', key], message: `not a route of this tenant's table ("METHOD /path" exactly as listed: ${[...labels].join(', ')})` })
      continue
    }
    // SPEC 16 applies to the translated routes only: a proxy route streams, and keeps no answer.
    if (entry.idempotency != null && tenant.legacy.routes.some((route) => `${route.method} ${route.path}` === key && route.action === 'proxy')) {
      ctx.addIssue({ code: 'custom', path: ['migration', 'routes', key, 'idempotency'], message: 'idempotency applies to execute and session-execute routes only (SPEC 16), not to a proxy route' })
    }
    const effective = effectiveDeprecation(tenantDeprecation, entry.deprecation)
    if (effective === undefined) {
      ctx.addIssue({ code: 'custom', path: ['migration', 'routes', key, 'deprecation', 'date'], message: 'date is required: the tenant sets no deprecation for this one to merge over' })
    } else if (effective !== null && entry.deprecation !== undefined) {
      for (const problem of deprecationProblems(effective)) ctx.addIssue({ code: 'custom', path: ['migration', 'routes', key, 'deprecation', ...problem.path], message: problem.message })
    }
  }
}

/**
 * SPEC 12: an `exempt` or `labels` entry of a kind (`fp:`, `hdr:`/`hdr#`) that no source of the
 * tenant's `clients.key` produces could never match: a config error. `anonymous` always can.
 */
function checkClientIdKinds(tenant: z.output<typeof tenantObject>, ctx: z.RefinementCtx): void {
  const key = tenant.clients.key
  const byCredential = key.includes('credential')
  const byHeader = key.some((source) => source.startsWith('header:'))
  const problem = (client: string): string | undefined => {
    if (client.startsWith('fp:') && !byCredential) return `an fp: id comes only from the credential source, which clients.key (${key.join(', ')}) does not list`
    if (client.startsWith('hdr') && !byHeader) return `an ${client.slice(0, 4)} id comes only from a header:NAME source, which clients.key (${key.join(', ')}) does not list`
    return undefined
  }
  const checkExempt = (exempt: readonly { client: string }[] | null | undefined, path: (string | number)[]) => {
    exempt?.forEach((exemption, index) => {
      const message = problem(exemption.client)
      if (message !== undefined) ctx.addIssue({ code: 'custom', path: [...path, index, 'client'], message })
    })
  }
  const checkIds = (ids: readonly string[] | null | undefined, path: (string | number)[]) => {
    ids?.forEach((client, index) => {
      const message = problem(client)
      if (message !== undefined) ctx.addIssue({ code: 'custom', path: [...path, index], message })
    })
  }
  checkExempt(tenant.legacy.deprecation?.exempt, ['legacy', 'deprecation', 'exempt'])
  for (const [route, entry] of Object.entries(tenant.migration.routes)) checkExempt(entry.deprecation?.exempt, ['migration', 'routes', route, 'deprecation', 'exempt'])
  // SPEC 12: `allow` and `deny` of a canary (SPEC 14) too.
  for (const list of ['allow', 'deny'] as const) {
    checkIds(tenant.migration.canary?.[list], ['migration', 'canary', list])
    for (const [route, entry] of Object.entries(tenant.migration.routes)) checkIds(entry.canary?.[list], ['migration', 'routes', route, 'canary', list])
  }
  for (const client of Object.keys(tenant.clients.labels)) {
    const message = problem(client)
    // The id is in the message too: a path shows a key with a colon cut short.
    if (message !== undefined) ctx.addIssue({ code: 'custom', path: ['clients', 'labels', client], message: `${client}: ${message}` })
  }
}

/**
 * SPEC 14 validation at load: a stage that needs `upstream.legacy` on a tenant without one, a
 * proxy route in stage `shadow` (SPEC 15 compares execute and session-execute only), and a canary
 * whose `allow` names `anonymous` or a client that `deny` names too. Each problem has the path of
 * the key that causes it: the route's own, else the tenant's.
 */
function checkMigration(tenant: z.output<typeof tenantObject>, ctx: z.RefinementCtx): void {
  const migration = tenant.migration
  const hasLegacy = tenant.upstream.legacy != null
  const needsLegacy = (stage: string | null | undefined, path: (string | number)[]) => {
    if (stage != null && STAGES_NEEDING_LEGACY.has(stage) && !hasLegacy) {
      ctx.addIssue({ code: 'custom', path, message: `stage ${stage} needs upstream.legacy, the backend that serves the legacy side; this tenant sets none` })
    }
  }
  needsLegacy(migration.stage, ['migration', 'stage'])
  checkCanaryLists(migration.canary, ['migration', 'canary'], ctx)
  for (const route of tenant.legacy.routes) {
    const label = `${route.method} ${route.path}`
    const entry = migration.routes[label]
    const stagePath = entry?.stage !== undefined ? ['migration', 'routes', label, 'stage'] : ['migration', 'stage']
    const stage = entry?.stage !== undefined ? entry.stage : migration.stage
    if (entry?.stage !== undefined) needsLegacy(entry.stage, stagePath)
    if (stage === 'shadow' && route.action === 'proxy') {
      ctx.addIssue({ code: 'custom', path: stagePath, message: `${label} is a proxy route: stage shadow compares execute and session-execute routes only (SPEC 15)` })
    }
    if (entry?.canary != null) {
      // A list the route leaves out is the tenant's; one it sets to null is none.
      const merged = { allow: entry.canary.allow === null ? [] : (entry.canary.allow ?? migration.canary?.allow ?? []), deny: entry.canary.deny === null ? [] : (entry.canary.deny ?? migration.canary?.deny ?? []) }
      checkCanaryLists(merged, ['migration', 'routes', label, 'canary'], ctx)
    }
  }
}

function checkCanaryLists(canary: { allow: readonly string[]; deny: readonly string[] } | null | undefined, path: (string | number)[], ctx: z.RefinementCtx): void {
  if (canary == null) return
  const denied = new Set(canary.deny)
  canary.allow.forEach((client, index) => {
    // SPEC 14: `anonymous` is everybody without an id; it may be kept out, never let in by name.
    if (client === 'anonymous') ctx.addIssue({ code: 'custom', path: [...path, 'allow', index], message: 'anonymous may be listed only in deny: it is in the canary only at percent 100' })
    else if (denied.has(client)) ctx.addIssue({ code: 'custom', path: [...path, 'allow', index], message: `${client} is in both allow and deny` })
  })
}

// A duration that sets a timer: Node runs one set beyond 2^31 - 1 ms after 1 ms. (`maxEventLoopDelayMs`
// is only compared, and `sessions.ttlMs` is an lru-cache age and a Redis PX: neither is capped.)
const LONGEST_TIMER_MS = 2_147_483_647
function durationMs(min: number) {
  return wholeNumber(z.number().int().min(min).max(LONGEST_TIMER_MS, `at most ${LONGEST_TIMER_MS} ms (about 24.8 days), the longest timer Node keeps`))
}
const headerName = z.string().regex(/^[A-Za-z0-9-]+$/, 'expected an HTTP header name').transform((name) => name.toLowerCase())

export const credentialSourceSchema = z.enum(['authorization', 'x-session-token', 'x-api-key', 'x-service-api-key'])

/** A name of RFC 3986 reg-name characters that is one character or does not end in a dot. */
const HOST_NAME_PATTERN = "[\\w.~!$&'()*+,;=-]|(?:[\\w.~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*(?:[\\w~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})"
/** isBareHost for config.schema.json (`admin.allowedHosts`): a bracketed IPv6 address, its zone as written, or a name. */
const BARE_HOST_PATTERN = `^(?:\\[[^\\]]*\\]?|${HOST_NAME_PATTERN})$`
/**
 * A `tenancy.hosts` key, which a `Host` must be able to name (checkHostKeys): a name as above, or
 * an IP literal as RFC 3986 writes it (an IPv6 address, its zone as RFC 6874's `%25`, or an
 * IPvFuture). Its one spelling (`[::1]`, not `[0:0::1]`) is beyond a pattern.
 */
const HOST_KEY_PATTERN = `^(?:\\[(?:[0-9A-Fa-f:.]+(?:%25(?:[\\w.~-]|%[0-9A-Fa-f]{2})+)?|[vV][0-9A-Fa-f]+\\.[\\w.:~!$&'()*+,;=-]+)\\]|${HOST_NAME_PATTERN})$`

const storeKind = z.enum(['memory', 'redis'])

/** A Redis (or Valkey) server, under either spelling of the store (SPEC 12). No defaults here: resolveStore tells written from left out. */
const redisSchema = z.strictObject({
  // An empty URL (the usual `${V4GW_REDIS_URL:-}`) means "none".
  url: z.union([z.literal(''), redisUrl], { error: 'Invalid URL: expected a redis:// or rediss:// URL' }).nullable().optional().transform((url) => (url === '' ? null : url)),
  keyPrefix: z.string().min(1).optional()
})

/** SPEC 12's defaults of the shared store. */
const STORE_DEFAULTS = { kind: 'memory', keyPrefix: 'v4gw:', flushMs: 2_000 } as const

const configObject = z.strictObject({
  listen: z.strictObject({ host: z.string().min(1).default('0.0.0.0'), port: port.default(8080) }).prefault({}),
  admin: z
    .strictObject({
      host: z.string().min(1).default('127.0.0.1'),
      port: port.default(9901),
      // An empty token (the usual `${V4GW_ADMIN_TOKEN:-}`) means "no token".
      // It is presented as `Authorization: Bearer <token>`: one with whitespace could never match.
      token: z
        .string()
        .regex(/^[\x21-\x7e]*$/, 'an admin token is visible ASCII without spaces (it is sent as Authorization: Bearer <token>)')
        .nullable()
        .default(null)
        .transform((token) => (token === '' ? null : token)),
      // Host names the admin API also answers to (SPEC 18): any other Host is refused on
      // `/admin/*`, so that a web page whose name was rebound to this address cannot call it.
      allowedHosts: z.array(z.string().min(1).refine(isBareHost, 'a host as a Host header names it, without a port: "gw.example.com", "10.0.0.5" or "[fd00::1]"').meta({ pattern: BARE_HOST_PATTERN })).default([])
    })
    .prefault({}),
  log: z
    .strictObject({
      level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
      /** SPEC 17: false turns the access lines off; errors are still logged. */
      access: booleanAllowingText().default(true)
    })
    .prefault({}),
  metrics: z
    .strictObject({
      /** SPEC 17: `code` (the exact status) on v4gw_requests_total; false keeps only `status_class`. */
      statusCodeLabel: booleanAllowingText().default(true)
    })
    .prefault({}),
  // SPEC 17: OpenTelemetry tracing (off unless enabled) and which trace headers a legacy request's
  // V4 calls carry. enabled, endpoint, protocol, headers, serviceName and the queue are restart-only.
  tracing: z
    .strictObject({
      enabled: booleanAllowingText().default(false),
      // OTLP over HTTP; a credential for the collector goes in `headers`, never in the URL (it would be logged).
      endpoint: otlpEndpointUrl.default('http://127.0.0.1:4318/v1/traces'),
      protocol: z.enum(['http/protobuf', 'http/json']).default('http/protobuf'),
      headers: z.record(headerName, z.string().regex(/^[\t\x20-\x7e]*$/, 'a header value is visible ASCII, spaces and tabs')).default({}),
      serviceName: z.string().min(1).default('v4gw'),
      // Parent-based trace-id ratio for the traces the gateway starts.
      sampleRatio: ratio.default(0.01),
      // false: the client's traceparent is a link on a new trace, its sampled flag ignored (docs/decisions.md).
      trustIncoming: booleanAllowingText().default(false),
      // Client baggage is untrusted (it may carry anything): off unless the operator says so.
      forwardBaggage: booleanAllowingText().default(false),
      // Finished spans waiting for export; more are dropped and counted (v4gw_trace_spans_dropped_total).
      maxQueueSpans: wholeNumber(z.number().int().min(1).max(1_000_000)).default(2048),
      // How long a span may wait for its batch to fill before the batch goes anyway.
      batchDelayMs: durationMs(1).default(1000)
    })
    .prefault({}),
  limits: z
    .strictObject({
      bodyBytes: positiveInt.default(1_048_576),
      upstreamTimeoutMs: durationMs(1).default(30_000),
      connectTimeoutMs: durationMs(1).default(5_000),
      maxInFlight: positiveInt.default(10_000),
      maxEventLoopDelayMs: positiveInt.default(1_000),
      // SPEC 15: shadow comparisons under way on a replica, all tenants; more are dropped, never queued.
      shadowInFlight: positiveInt.default(1_000)
    })
    .prefault({}),
  shutdown: z
    .strictObject({
      graceMs: durationMs(0).default(10_000),
      // Idle kept-alive connections stay open this long after the signal, so a request already on its way is answered, not cut.
      idleCloseMs: durationMs(0).default(1_000)
    })
    .prefault({}),
  credentials: z
    .strictObject({
      serviceKeyPrefix: z.string().min(1).default('key_'),
      serviceAccountPrefix: z.string().min(1).default('sa_'),
      queryParam: z.string().min(1).nullable().default(null),
      sources: z.array(credentialSourceSchema).min(1).default(['authorization', 'x-session-token', 'x-api-key', 'x-service-api-key'])
    })
    .prefault({}),
  sessions: z
    .strictObject({
      maxEntries: positiveInt.default(10_000),
      ttlMs: positiveInt.default(900_000),
      staleStatuses: z.array(wholeNumber(z.number().int().min(400).max(599))).default([404, 410]),
      sessionIdPaths: z.array(jsonPointer.min(1)).min(1).default(['/sessionId', '/id', '/session/id', '/meta/sessionId']),
      // SPEC 12: the older spelling of the top-level `store` (resolveStore).
      store: storeKind.optional(),
      redis: redisSchema.optional()
    })
    .superRefine((sessions, ctx) => {
      if (sessions.store === 'redis' && sessions.redis?.url == null) {
        ctx.addIssue({ code: 'custom', path: ['redis', 'url'], message: 'sessions.store is redis but no sessions.redis.url is set' })
      }
    })
    .meta(whenKeyIs('store', ['redis'], present('redis', { type: 'object', ...present('url', { type: 'string', minLength: 1 }) })))
    .prefault({}),
  // SPEC 12's shared store (restart); its defaults are applied by resolveStore, which reads both spellings.
  store: z
    .strictObject({
      kind: storeKind.optional(),
      redis: redisSchema.optional(),
      // SPEC 12: a fleet answer may be up to 10 s old. A count made as a write starts waits for
      // that write (up to the store's 1 s command timeout), flushMs, and the next write (1 s more).
      flushMs: wholeNumber(z.number().int().min(1).max(8_000, 'at most 8000 ms: a fleet answer may be up to 10 s old (SPEC 12), and a count can wait for a write (up to 1 s), flushMs and the next write (up to 1 s)')).optional()
    })
    .superRefine((store, ctx) => {
      if (store.kind === 'redis' && store.redis?.url == null) {
        ctx.addIssue({ code: 'custom', path: ['redis', 'url'], message: 'store.kind is redis but no store.redis.url is set' })
      }
    })
    .meta(whenKeyIs('kind', ['redis'], present('redis', { type: 'object', ...present('url', { type: 'string', minLength: 1 }) })))
    .optional(),
  // SPEC 12: client records of the registry per replica, every tenant together.
  clients: z.strictObject({ maxTotal: wholeNumber(z.number().int().min(1).max(10_000_000)).default(100_000) }).prefault({}),
  tenancy: z
    .strictObject({
      // Its value is logged as requestedTenant when it names no tenant (SPEC 17): never a header that carries a credential.
      header: z
        .string()
        .regex(
          new RegExp(`^(?!(?:${CREDENTIAL_HEADERS.map(anyCase).join('|')})$)[A-Za-z0-9-]+$`),
          `expected an HTTP header name that does not carry a credential (${CREDENTIAL_HEADERS.join(', ')}): its value is logged when it names no tenant`
        )
        .transform((name) => name.toLowerCase())
        .default('x-tenant-id'),
      hosts: z.record(z.string().min(1).meta({ pattern: HOST_KEY_PATTERN }), z.string().min(1)).default({}).superRefine(checkHostKeys),
      default: z.string().min(1).nullable().default(null)
    })
    .prefault({}),
  internalAdmin: z
    .strictObject({
      // http(s) only: `admin.internal:9000` parses as a URL of scheme `admin.internal` whose
      // origin is "null", which no upstream ever matches, so the guard would be off unseen.
      urls: z.array(anyHttpUrl).default([]),
      pathPrefixes: z.array(z.string().startsWith('/')).default([])
    })
    .prefault({}),
  tenants: z.record(z.string().regex(/^[A-Za-z0-9._-]+$/, 'tenant names use A-Z a-z 0-9 . _ -'), tenantSchema).meta({ minProperties: 1 })
})

/**
 * A Host entry compared as normalizeHost leaves it (no port, no trailing dot, IPv6 in brackets,
 * where a zone id is taken as written) and, when a name, one a Host can be ("" is min(1)'s).
 */
function isBareHost(host: string): boolean {
  const lower = host.toLowerCase()
  return lower === '' || ((lower.startsWith('[') || (!lower.includes(':') && isValidHost(lower))) && normalizeHost(lower) === lower)
}

/**
 * `Host` is matched lower-cased, without its port or a trailing dot (normalizeHost): a key
 * with either would never match, and two keys that differ only in case would silently be one.
 */
function checkHostKeys(hosts: Record<string, string>, ctx: z.RefinementCtx): void {
  const seen = new Set<string>()
  for (const host of Object.keys(hosts)) {
    const lower = host.toLowerCase()
    if (!lower.startsWith('[') && lower.indexOf(':') !== lower.lastIndexOf(':')) {
      // A bare IPv6 address: a Host header always brackets it (RFC 3986 3.2.2).
      ctx.addIssue({ code: 'custom', path: [host], message: `an IPv6 address comes in brackets in a Host header: write "[${lower}]"` })
    } else if (!isValidHost(lower)) {
      // Keys are not substituted (SPEC 8): `${PUBLIC_HOST}` here would match no request.
      ctx.addIssue({ code: 'custom', path: [host], message: 'expected a host as a Host header names it (RFC 3986: a name, an IPv4 address or a bracketed IPv6 one); keys are not substituted' })
    } else if (normalizeHost(lower) !== lower) {
      ctx.addIssue({ code: 'custom', path: [host], message: `Host is matched without its port or a trailing dot: write "${normalizeHost(lower) ?? ''}"` })
    } else if (canonicalHost(lower) !== lower) {
      ctx.addIssue({ code: 'custom', path: [host], message: `an IPv6 address is matched in one spelling, without a zone: write "${canonicalHost(lower)}"` })
    }
    if (seen.has(lower)) ctx.addIssue({ code: 'custom', path: [host], message: 'listed twice: Host is matched without regard to case' })
    seen.add(lower)
  }
}

/** The sections checkCrossReferences reads. */
const CROSS_CHECKED_SECTIONS: ReadonlySet<string> = new Set(['tenants', 'tenancy', 'internalAdmin', 'credentials'])
/** The sections checkLegacyUpstreams reads. */
const LEGACY_UPSTREAM_SECTIONS: ReadonlySet<string> = new Set(['tenants', 'listen'])
/** The sections checkStoreSpellings reads. */
const STORE_SECTIONS: ReadonlySet<string> = new Set(['store', 'sessions'])

/**
 * zod skips a refinement after any aborting issue (a value of the wrong type, anywhere). These
 * checks need only the sections they read to be whole, so a file with a bad port still hears
 * about its unknown default tenant in the same run. (An unknown key does not abort.)
 */
function whenWhole(sections: ReadonlySet<string>) {
  return (payload: { value: unknown; issues: readonly z.core.$ZodRawIssue[] }): boolean =>
    isPlainObject(payload.value) &&
    !payload.issues.some((issue) => issue.continue !== true && (issue.path === undefined || issue.path.length === 0 || sections.has(String(issue.path[0]))))
}

export const configSchema = configObject
  .superRefine(checkCrossReferences, { when: whenWhole(CROSS_CHECKED_SECTIONS) })
  .superRefine(checkStoreSpellings, { when: whenWhole(STORE_SECTIONS) })
  .superRefine(checkLegacyUpstreams, { when: whenWhole(LEGACY_UPSTREAM_SECTIONS) })
  .transform(resolveStore)

type ParsedConfig = z.output<typeof configObject>

/** What each spelling of the store says (SPEC 12), with what it leaves out undefined. */
function storeSpellings(config: ParsedConfig) {
  return [
    { path: ['store'], kind: config.store?.kind, url: config.store?.redis?.url, keyPrefix: config.store?.redis?.keyPrefix },
    { path: ['sessions'], kind: config.sessions.store, url: config.sessions.redis?.url, keyPrefix: config.sessions.redis?.keyPrefix }
  ] as const
}

/**
 * SPEC 12: `sessions.store` / `sessions.redis` are the older spelling of `store.kind` /
 * `store.redis`; they conflict only when both are written with different values.
 */
function checkStoreSpellings(config: ParsedConfig, ctx: z.RefinementCtx): void {
  const [current, older] = storeSpellings(config)
  const compare = (currentPath: (string | number)[], olderName: string, a: unknown, b: unknown) => {
    if (a !== undefined && b !== undefined && a !== b) {
      ctx.addIssue({ code: 'custom', path: currentPath, message: `differs from ${olderName}, the older spelling of the same setting: keep one of the two` })
    }
  }
  compare(['store', 'kind'], 'sessions.store', current.kind, older.kind)
  compare(['store', 'redis', 'url'], 'sessions.redis.url', current.url, older.url)
  compare(['store', 'redis', 'keyPrefix'], 'sessions.redis.keyPrefix', current.keyPrefix, older.keyPrefix)
}

/**
 * The one store the gateway runs with, from either spelling (SPEC 12), defaults filled in. It is
 * written back to `sessions.store` / `sessions.redis` too, so that the session map, which was
 * configured there first, reads the same value.
 */
function resolveStore(config: ParsedConfig) {
  const [current, older] = storeSpellings(config)
  const store = {
    kind: current.kind ?? older.kind ?? STORE_DEFAULTS.kind,
    redis: { url: current.url ?? older.url ?? null, keyPrefix: current.keyPrefix ?? older.keyPrefix ?? STORE_DEFAULTS.keyPrefix },
    flushMs: config.store?.flushMs ?? STORE_DEFAULTS.flushMs
  }
  return { ...config, store, sessions: { ...config.sessions, store: store.kind, redis: store.redis } }
}

const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]'])
const WILDCARD_HOSTS: ReadonlySet<string> = new Set(['0.0.0.0', '::', '[::]'])

/**
 * Whether `url` dials the traffic listener: its port, and its host, or a loopback host when the
 * listener is bound to a wildcard or loopback (the names the gateway's own machine answers to).
 */
function isListenerAddress(url: URL, listen: { host: string; port: number }): boolean {
  const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port)
  if (port !== listen.port) return false
  const host = url.hostname.toLowerCase()
  const listenHost = listen.host.toLowerCase()
  if (host === listenHost || host === `[${listenHost}]`) return true
  return LOOPBACK_HOSTS.has(host) && (WILDCARD_HOSTS.has(listenHost) || LOOPBACK_HOSTS.has(listenHost) || listenHost === '::1')
}

/**
 * SPEC 14: a legacy upstream on the traffic listener's own address would send every legacy
 * request back to the gateway (answered 508 LOOP_DETECTED at best).
 */
function checkLegacyUpstreams(config: ParsedConfig, ctx: z.RefinementCtx): void {
  for (const name of tenantsWithLegacyUpstreamOn(config.tenants, config.listen)) {
    ctx.addIssue({ code: 'custom', path: ['tenants', name, 'upstream', 'legacy'], message: "this is the traffic listener's own address (listen): the legacy upstream must be another server" })
  }
}

/**
 * The tenants whose `upstream.legacy` is `listen`'s own address. A reload asks it of the running
 * listener too: `listen` is restart-only, so the file's may not be the address in use.
 */
export function tenantsWithLegacyUpstreamOn(tenants: Readonly<Record<string, { upstream: { legacy?: string | null | undefined } }>>, listen: { host: string; port: number }): string[] {
  return Object.entries(tenants).flatMap(([name, tenant]) => {
    const legacy = tenant.upstream.legacy
    const url = legacy == null || legacy === EMBEDDED_UPSTREAM ? undefined : parseUrl(legacy)
    return url !== undefined && isListenerAddress(url, listen) ? [name] : []
  })
}

/**
 * An origin as SPEC 3's internalAdmin guard compares it: scheme, host and port, the host without
 * its trailing dot (`admin.internal.` is the same host to DNS, and to normalizeHost).
 */
function comparedOrigin(url: string): string | undefined {
  const parsed = parseUrl(url)
  if (parsed === undefined) return undefined
  if (parsed.hostname.length > 1 && parsed.hostname.endsWith('.')) parsed.hostname = parsed.hostname.slice(0, -1)
  return parsed.origin
}

/** What one section says of another: tenant names, internal origins. */
function checkCrossReferences(config: z.output<typeof configObject>, ctx: z.RefinementCtx): void {
  if (Object.keys(config.tenants).length === 0) {
    ctx.addIssue({ code: 'custom', path: ['tenants'], message: 'at least one tenant is required' })
  }
  const blockedOrigins = new Set(config.internalAdmin.urls.map(comparedOrigin))
  for (const [name, tenant] of Object.entries(config.tenants)) {
    for (const which of ['staging', 'production', 'legacy'] as const) {
      const url = tenant.upstream[which]
      const origin = url == null || url === EMBEDDED_UPSTREAM ? undefined : comparedOrigin(url)
      if (origin !== undefined && blockedOrigins.has(origin)) {
        ctx.addIssue({
          code: 'custom',
          path: ['tenants', name, 'upstream', which],
          message: 'this origin is listed in internalAdmin.urls: the internal platform-admin surface must never be reachable through the gateway'
        })
      }
    }

  }
  const queryParam = config.credentials.queryParam?.toLowerCase()
  for (const [name, tenant] of Object.entries(config.tenants)) {
    tenant.clients.key.forEach((source, index) => {
      // SPEC 12: no client-id source may carry a credential, the query credential's name included.
      if (queryParam !== undefined && source === `header:${queryParam}`) {
        ctx.addIssue({ code: 'custom', path: ['tenants', name, 'clients', 'key', index], message: `${source} has the name of the query credential (credentials.queryParam): a client id never comes from a credential` })
      }
    })
  }
  const tenantNames = new Set(Object.keys(config.tenants))
  if (config.tenancy.default !== null && !tenantNames.has(config.tenancy.default)) {
    ctx.addIssue({ code: 'custom', path: ['tenancy', 'default'], message: `tenant "${config.tenancy.default}" is not configured` })
  }
  for (const [host, tenant] of Object.entries(config.tenancy.hosts)) {
    if (!tenantNames.has(tenant)) ctx.addIssue({ code: 'custom', path: ['tenancy', 'hosts', host], message: `tenant "${tenant}" is not configured` })
  }
}

export type GatewayConfig = z.output<typeof configSchema>
export type TenantConfig = z.output<typeof tenantSchema>
export type LegacyRouteConfig = z.output<typeof legacyRouteSchema>
export type LegacyFields = z.output<typeof legacyFieldsSchema>
export type LegacyAction = z.output<typeof legacyActionSchema>
export type CredentialSource = z.output<typeof credentialSourceSchema>
export type CredentialsConfig = GatewayConfig['credentials']
export type SessionsConfig = GatewayConfig['sessions']
export type LimitsConfig = GatewayConfig['limits']
export type MigrationStage = z.output<typeof migrationStageSchema>
/** SPEC 14's canary of a route, the route's entry merged over the tenant's. */
export type CanaryConfig = NonNullable<z.output<typeof canarySchema>>

/** config/deprecation.ts spells SPEC 13's shape as plain types (it cannot import this file); the compiler holds the two to each other. */
type SameType<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
export const DEPRECATION_TYPES_AGREE: SameType<NonNullable<TenantConfig['legacy']['deprecation']>, DeprecationConfig> &
  SameType<NonNullable<TenantConfig['migration']['routes'][string]['deprecation']>, RouteDeprecationConfig> = true
/** SPEC 16's settings of one route, the route's entry merged over the tenant's. */
export type IdempotencyConfig = NonNullable<z.output<typeof idempotencySchema>>
/** SPEC 16's defaults, which a route's entry merges over when its tenant sets no idempotency. */
export const IDEMPOTENCY_DEFAULTS: IdempotencyConfig = Object.freeze(idempotencySchema.unwrap().parse({}))
