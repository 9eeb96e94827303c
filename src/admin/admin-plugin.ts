import type { FastifyInstance, FastifyRequest } from 'fastify'
import { z } from 'zod'
import { buildErrorBody } from '../errors/error-body.js'
import { roundMs } from '../util/round-ms.js'
import { sendErrorEnvelope, sendGatewayError } from './send-gateway-error.js'
import { GatewayError } from '../errors/registry.js'
import { maskCredentials } from '../credentials/index.js'
import type { ShadowResults } from '../fleet/shadow-results.js'
import type { GatewayMetrics } from '../observability/metrics.js'
import type { ClientRegistry } from '../fleet/client-registry.js'
import type { SessionStore } from '../sessions/session-store.js'
import type { ExplainInput, Explanation } from '../plan/explain-request.js'
import type { UpcomingBrownout } from '../tenancy/deprecation-policy.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import { migrationStageSchema } from '../config/schema.js'
import { pauseBrownouts, resumeBrownouts } from '../tenancy/pause-brownouts.js'
import { removeStageOverrides, setStageOverride } from '../tenancy/set-stage-override.js'
import type { StageOverrideRecords } from '../tenancy/stage-override-records.js'
import { assertAdminToken } from './admin-auth.js'
import { bodyProblems } from './body-problems.js'
import { buildMigrationAnswer, migrationRoutes, parseClientsListed } from './migration-answer.js'
import { logAdminChange, logAdminChangeOutcome } from './admin-change.js'
import { isAdminHost, isLoopbackPeer } from './admin-guards.js'
import { MIGRATION_PAGE_HEADERS, MIGRATION_PAGE_HTML, MIGRATION_PAGE_PATH } from './migration-page.js'

/** `restartRequired`: the restart-only keys whose new values wait for a restart (none are applied). */
export type ReloadResult = { ok: true; tenants: string[]; sessionsDropped: number; restartRequired: string[]; upcomingBrownouts: UpcomingBrownout[] } | { ok: false; problems: string[] }

export interface AdminDeps {
  /** True once the config is loaded and the traffic listener is up, false while draining (SPEC 9). */
  isReady: () => boolean
  adminToken: () => string | null
  /** `admin.allowedHosts` of the running config. */
  allowedHosts: () => readonly string[]
  /** The host the admin listener was asked to bind; undefined before it listens. */
  listenerHost: () => string | undefined
  /** The running config's hash (SPEC 17), also in `v4gw_config_info`. */
  configHash: () => string
  metrics: GatewayMetrics
  sessionStore: SessionStore
  /** SPEC 12's client registry. */
  migration: ClientRegistry
  reload: () => Promise<ReloadResult>
  explain: (input: ExplainInput) => Explanation | Promise<Explanation>
  /** The running config's runtime: brownout pauses are checked against it and kept in it (SPEC 13). */
  runtime: () => GatewayRuntime
  /** SPEC 15's shadow results (the fleet's with Redis). */
  shadow: ShadowResults
  /** SPEC 14's stage overrides (the fleet's with Redis); the runtime reads the same records. */
  stageOverrides: StageOverrideRecords
}

/**
 * A change's reason: SPEC 14's `admin change` line carries it, and a body over 4 KiB is logged
 * with its strings cut at 1,000 characters (admin-change.ts): a longer reason would be stored
 * and answered, and only its start on the audit line.
 */
const reasonSchema = z.string().min(1).max(1_000)

/** SPEC 14's override body. */
const stageOverrideBodySchema = z.strictObject({
  tenant: z.string().min(1),
  route: z.string().min(1).nullable().optional(),
  stage: migrationStageSchema,
  reason: reasonSchema,
  until: z.iso.datetime({ offset: true }).optional()
})

/** SPEC 13's pause body. */
const pauseBodySchema = z.strictObject({
  tenant: z.string().min(1),
  route: z.string().min(1).nullable().optional(),
  until: z.iso.datetime({ offset: true }),
  reason: reasonSchema
})

const explainBodySchema = z.strictObject({
  method: z.string().min(1),
  path: z.string().startsWith('/'),
  tenant: z.string().min(1).optional(),
  // A list for a header sent more than once: explain then sees both copies, as the listener would.
  headers: z.record(z.string(), z.union([z.string(), z.array(z.string())])).optional(),
  body: z.unknown().optional(),
  rawBody: z.string().optional(),
  at: z.iso.datetime({ offset: true }).optional(),
  // SPEC 14: the client to decide for (SPEC 12's id); else the request's own.
  client: z
    .string()
    .regex(/^(?:fp:[0-9a-f]{16}|hdr:[A-Za-z0-9._:-]{1,128}|hdr#[0-9a-f]{16}|anonymous)$/, 'expected a client id: fp:<16 hex digits>, hdr:<id>, hdr#<16 hex digits> or anonymous')
    .optional()
})

/** What a body that explain cannot take reads as: only explain takes a body, and it takes JSON. */
const NOT_JSON = Symbol('not JSON')
const INVALID_JSON = Symbol('invalid JSON')

/**
 * The admin listener (SPEC 9, 18): open probes and metrics; `/admin/*` only for a `Host` that
 * names this listener, then behind `admin.token` when set, else for loopback peers only.
 */
export async function adminPlugin(app: FastifyInstance, deps: AdminDeps): Promise<void> {
  app.setErrorHandler(sendGatewayError)
  app.setNotFoundHandler(adminNotFound)
  // Bodies are read and marked rather than refused here, so that each endpoint answers for its
  // own: explain and the calls that change state refuse one that is not JSON (415), and an empty
  // body of any type is no body (`curl -d '' …/admin/reload` sends a form type).
  app.removeContentTypeParser(['application/json', 'text/plain'])
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => done(null, parseJsonOrMark(body as string)))
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, (body as Buffer).length === 0 ? undefined : NOT_JSON))

  const serviceKeyPrefix = (): string => deps.runtime().config.credentials.serviceKeyPrefix
  const acceptChange = changeGuard(serviceKeyPrefix)

  app.get('/healthz', async function healthz() {
    return { status: 'ok' }
  })
  app.get('/readyz', async function readyz(_request, reply) {
    const ready = deps.isReady()
    // A shared store that is down leaves readiness alone: the per-replica map serves, and a Redis
    // outage must not take every replica out of the load balancer at once (docs/scaling.md).
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', configHash: deps.configHash(), sessionStore: deps.sessionStore.describe() })
  })
  app.get('/metrics', async function metrics(_request, reply) {
    return reply.header('content-type', deps.metrics.registry.contentType).send(await deps.metrics.registry.metrics())
  })

  // The `/admin/*` endpoints in a context of their own, whose hook guards them (and that
  // prefix's 404s): the router matches the decoded path, so a check of the raw URL's text
  // would let `/%61dmin/...` through to the same handlers.
  await app.register(
    async function adminEndpoints(admin) {
      // SPEC 18's order: Host (403), then token or peer (401), then the body's media type (415, below).
      admin.addHook('onRequest', async function checkAdminCaller(request) {
        if (!isAdminHost(request.headers.host, deps.listenerHost(), deps.allowedHosts())) {
          throw new GatewayError('FORBIDDEN', 'the admin API answers only to a Host of loopback, of this listener or in admin.allowedHosts')
        }
        const token = deps.adminToken()
        if (token === null && !isLoopbackPeer(request.socket.remoteAddress)) {
          throw new GatewayError('AUTH_INVALID', 'set admin.token to use the admin API from another host')
        }
        // SPEC 12: the migration page holds no data and is served without the token; its data
        // calls need it. The Host and peer checks above still apply (docs/decisions.md).
        if (request.routeOptions.url === MIGRATION_PAGE_PATH) return
        assertAdminToken(token, request.headers.authorization)
      })
      admin.setNotFoundHandler(adminNotFound)
      // An accepted change's refusal or failure is on record next to its `admin change` line.
      admin.addHook('onResponse', async function recordChangeOutcome(request, reply) {
        logAdminChangeOutcome(request, reply.statusCode)
      })
      admin.get('/sessions', async function listSessions() {
        const tenants = await deps.sessionStore.countByTenant()
        return { total: Object.values(tenants).reduce((sum, count) => sum + count, 0), tenants }
      })
      admin.delete<{ Querystring: { tenant?: string | string[] } }>('/sessions', { preHandler: acceptChange({ query: ['tenant'] }) }, async function clearSessions(request) {
        // Two tenants would otherwise reach the store as an array and match nothing, answering `deleted: 0`.
        const tenant = oneOrNone(request.query.tenant, 'tenant', 'name one tenant, or none for all')
        const deleted = await deps.sessionStore.clear(tenant)
        // Typed by hand, as the `admin change` line's query is, and masked the same way (SPEC 9).
        request.log.info({ tenant: tenant === undefined ? undefined : maskCredentials(tenant, serviceKeyPrefix()), deleted }, 'session map cleared')
        return { deleted }
      })
      admin.post('/reload', { preHandler: acceptChange({ query: [] }) }, async function reload(request, reply) {
        const result = await deps.reload()
        if (result.ok) return { status: 'reloaded', tenants: result.tenants, sessionsDropped: result.sessionsDropped, restartRequired: result.restartRequired, upcomingBrownouts: result.upcomingBrownouts }
        // The SPEC 6 envelope, with every problem of the file: each is "path: message", not a pointer into this request.
        const rejected = new GatewayError('CONFIG_INVALID', 'the config file is invalid; the running config stays')
        const body = buildErrorBody(rejected, request.id, roundMs(reply.elapsedTime))
        return sendErrorEnvelope(reply, rejected.statusCode, request.id, { status: 'rejected', error: { ...body.error, problems: result.problems }, meta: body.meta })
      })
      admin.post('/explain', async function explain(request) {
        if (request.body === NOT_JSON) throw new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'explain takes an application/json body')
        if (request.body === INVALID_JSON) throw new GatewayError('INVALID_REQUEST', 'the explain body is not valid JSON', { details: [{ pointer: '', message: 'not valid JSON' }] })
        const parsed = explainBodySchema.safeParse(request.body)
        if (!parsed.success) {
          const details = bodyProblems(parsed.error)
          throw new GatewayError('INVALID_REQUEST', 'expected { method, path, tenant?, headers?, body?, rawBody?, at? }', { details })
        }
        return deps.explain(parsed.data as ExplainInput)
      })
      admin.post('/brownouts/pause', { preHandler: acceptChange({ query: [], body: true }) }, async function pauseBrownoutsEndpoint(request) {
        const parsed = pauseBodySchema.safeParse(request.body ?? null)
        if (!parsed.success) {
          const details = bodyProblems(parsed.error)
          throw new GatewayError('INVALID_REQUEST', 'expected { tenant, route?, until, reason }', { details })
        }
        return pauseBrownouts(deps.runtime(), { ...parsed.data, reason: maskCredentials(parsed.data.reason, serviceKeyPrefix()) }, Date.now())
      })
      admin.delete<{ Querystring: { tenant?: string | string[]; route?: string | string[] } }>('/brownouts/pause', { preHandler: acceptChange({ query: ['tenant', 'route'] }) }, async function resumeBrownoutsEndpoint(request) {
        const { tenant, route } = request.query
        if (typeof tenant !== 'string' || tenant === '') {
          throw new GatewayError('INVALID_REQUEST', 'name one tenant: ?tenant=T[&route=METHOD%20/path]', { details: [{ pointer: 'query:tenant', message: 'required, once' }] })
        }
        const named = oneOrNone(route, 'route', 'name one route, or none for the tenant')
        return resumeBrownouts(deps.runtime(), tenant, named ?? null, Date.now())
      })
      admin.put('/migration/stage', { preHandler: acceptChange({ query: [], body: true }) }, async function putStageOverride(request) {
        const parsed = stageOverrideBodySchema.safeParse(request.body ?? null)
        if (!parsed.success) {
          const details = bodyProblems(parsed.error)
          throw new GatewayError('INVALID_REQUEST', 'expected { tenant, route?, stage, reason, until? }', { details })
        }
        return setStageOverride(deps.runtime(), deps.stageOverrides, { ...parsed.data, reason: maskCredentials(parsed.data.reason, serviceKeyPrefix()) }, Date.now())
      })
      admin.delete<{ Querystring: { tenant?: string | string[]; route?: string | string[]; all?: string | string[] } }>('/migration/stage', { preHandler: acceptChange({ query: ['tenant', 'route', 'all'] }) }, async function deleteStageOverride(request) {
        const { tenant, route, all } = request.query
        if (typeof tenant !== 'string' || tenant === '') {
          throw new GatewayError('INVALID_REQUEST', 'name one tenant: ?tenant=T[&route=METHOD%20/path | &all=true]', { details: [{ pointer: 'query:tenant', message: 'required, once' }] })
        }
        const named = oneOrNone(route, 'route', 'name one route, or none for the tenant')
        if (all !== undefined && all !== 'true') throw new GatewayError('INVALID_REQUEST', 'all takes only true', { details: [{ pointer: 'query:all', message: 'true, once' }] })
        const target = { tenant, route: named ?? null, all: all === 'true' }
        const { removed, scope } = await removeStageOverrides(deps.runtime(), deps.stageOverrides, target, Date.now())
        // One override named: it (or null), as the pause's DELETE answers; `all`: the list.
        return target.all ? { overrides: removed, scope } : { override: removed[0] ?? null, scope }
      })
      admin.get('/ui', async function migrationPage(_request, reply) {
        return reply.headers(MIGRATION_PAGE_HEADERS).send(MIGRATION_PAGE_HTML)
      })
      admin.get<{ Querystring: { tenant?: string | string[] } }>('/shadow', async function shadowResults(request) {
        const tenant = request.query.tenant
        if (Array.isArray(tenant)) throw new GatewayError('INVALID_REQUEST', 'name one tenant, or none for all', { details: [{ pointer: 'query:tenant', message: 'given more than once' }] })
        const routes = shadowRoutes(deps.runtime(), tenant === undefined || tenant === '' ? undefined : tenant)
        const nowMs = Date.now()
        const answer = await deps.shadow.answer(routes, nowMs)
        return { schemaVersion: 1, generatedAt: new Date(nowMs).toISOString(), scope: answer.scope, tenants: answer.tenants }
      })
      admin.delete<{ Querystring: { tenant?: string | string[]; route?: string | string[] } }>('/shadow', { preHandler: acceptChange({ query: ['tenant', 'route'] }) }, async function resetShadowResults(request) {
        const { tenant, route } = request.query
        if (typeof tenant !== 'string' || tenant === '') {
          throw new GatewayError('INVALID_REQUEST', 'name one tenant: ?tenant=T[&route=METHOD%20/path]', { details: [{ pointer: 'query:tenant', message: 'required, once' }] })
        }
        const named = oneOrNone(route, 'route', 'name one route, or none for the tenant') ?? null
        const labels = shadowRoutes(deps.runtime(), tenant).get(tenant) as readonly string[]
        if (named !== null && !labels.includes(named)) throw new GatewayError('ROUTE_NOT_FOUND', 'the tenant has no execute or session-execute route of that name')
        const scope = await deps.shadow.reset(tenant, named === null ? labels : [named], Date.now())
        return { reset: { tenant, route: named }, scope }
      })
      admin.get<{ Querystring: { tenant?: string | string[]; clients?: string | string[] } }>('/migration', async function migration(request) {
        const { tenant } = request.query
        if (Array.isArray(tenant)) throw new GatewayError('INVALID_REQUEST', 'name one tenant, or none for all', { details: [{ pointer: 'query:tenant', message: 'given more than once' }] })
        const clients = parseClientsListed(request.query.clients)
        const runtime = deps.runtime()
        const only = tenant === undefined || tenant === '' ? undefined : tenant
        const routes = migrationRoutes(runtime, only)
        // SPEC 12's answer: the registry (the fleet's with Redis) with the running config's stages, deprecations and pauses.
        return buildMigrationAnswer(runtime, deps.stageOverrides, await deps.migration.view(routes, clients), { routesOf: routes, only }, Date.now())
      })
    },
    { prefix: '/admin' }
  )
}

/** What one admin call that changes state takes: its query keys, and whether a JSON body. */
interface ChangeShape {
  readonly query: readonly string[]
  readonly body?: boolean
}

/**
 * The admin calls that change state (SPEC 14) take a JSON body or none: a form or text body is
 * refused before anything changes, and an accepted call is written to the log as `admin change`
 * (redacted with the running config's service-key prefix). Refused too, since each would change
 * more or other than was asked:
 * - a cross-site request: a page in the operator's browser can send a form or a `no-cors` POST
 *   to a loopback admin listener that needs no token; the browser says whose page it is
 *   (`Origin`, `Sec-Fetch-Site`), a CLI or curl sends neither;
 * - a query key the call does not read (`?Tenant=acme` would clear every tenant's sessions,
 *   `&rout=` resume the whole tenant's brownouts);
 * - a body member naming what the query names on a call that reads no body (`{"tenant":"acme"}`
 *   on a DELETE would have cleared every tenant's sessions).
 */
function changeGuard(serviceKeyPrefix: () => string): (shape: ChangeShape) => (request: FastifyRequest) => Promise<void> {
  return (shape) =>
    async function acceptChange(request) {
      if (isCrossSite(request)) throw new GatewayError('FORBIDDEN', 'a cross-site request may not change the gateway: call the admin API from its own page, the CLI or curl')
      if (request.body === NOT_JSON) throw new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'admin calls that change state take an application/json body, or none')
      if (request.body === INVALID_JSON) throw new GatewayError('INVALID_REQUEST', 'the body is not valid JSON', { details: [{ pointer: '', message: 'not valid JSON' }] })
      // Accepted (SPEC 18's checks passed): on record from here, a call refused below for what it
      // asks included, as a body the endpoint refuses is.
      const prefix = serviceKeyPrefix()
      logAdminChange(request, prefix)
      for (const key of Object.keys(request.query as Record<string, unknown>)) {
        if (!shape.query.includes(key)) {
          // The key masked as the line masks it: it may be a credential pasted in the wrong place.
          const named = maskCredentials(key, prefix)
          throw new GatewayError('INVALID_REQUEST', `this call reads no ${named} (${shape.query.length === 0 ? 'no query' : shape.query.join(', ')})`, { details: [{ pointer: `query:${named}`, message: 'not read by this call' }] })
        }
      }
      // SPEC 14 lets any such call carry a JSON body (a reason, for the log); one that names what
      // the query names would be read by a caller as narrowing the call, and is not.
      const body = request.body
      if (shape.body !== true && typeof body === 'object' && body !== null) {
        const misplaced = shape.query.find((key) => Object.hasOwn(body, key))
        if (misplaced !== undefined) {
          throw new GatewayError('INVALID_REQUEST', `${misplaced} goes in the query (?${misplaced}=…): this call reads nothing of its body`, { details: [{ pointer: `/${misplaced}`, message: 'not read from the body' }] })
        }
      }
    }
}

/**
 * A request a browser sent from another site's page: its `Origin` is not the admin listener's
 * own (the `Host` it was sent to; `null` from a sandboxed page or a file), or it says so in
 * `Sec-Fetch-Site`. Without either header (the CLI, curl) it is not one.
 */
function isCrossSite(request: FastifyRequest): boolean {
  const site = request.headers['sec-fetch-site']
  if (site === 'cross-site' || site === 'same-site') return true
  const origin = request.headers.origin
  if (origin === undefined) return false
  try {
    return new URL(origin).host !== (request.headers.host ?? '').toLowerCase()
  } catch {
    return true
  }
}

/** An empty body is no body; JSON.parse keeps a `__proto__` member as an own property, never the prototype. */
function parseJsonOrMark(text: string): unknown {
  if (text.trim() === '') return undefined
  try {
    return JSON.parse(text)
  } catch {
    return INVALID_JSON
  }
}

/**
 * The routes `/admin/shadow` answers for: every `execute` and `session-execute` route (SPEC 15
 * compares those only) of each tenant, or of the one named; an unknown one is 404.
 */
function shadowRoutes(runtime: GatewayRuntime, only: string | undefined): Map<string, string[]> {
  const routes = new Map<string, string[]>()
  for (const [name, tenant] of runtime.tenancy.tenants) {
    if (only !== undefined && name !== only) continue
    routes.set(
      name,
      tenant.routes.filter((route) => route.action !== 'proxy').map((route) => route.label)
    )
  }
  if (only !== undefined && routes.size === 0) throw new GatewayError('TENANT_UNKNOWN', 'no tenant of that name is configured')
  return routes
}

function adminNotFound(): never {
  throw new GatewayError('ROUTE_NOT_FOUND', 'no such admin endpoint')
}

/**
 * A query parameter of a call that changes state, which narrows what it changes: absent, or one
 * non-empty value. An empty one (`?tenant=$T` with T unset) is refused rather than read as
 * absent, which would widen the change to every tenant or the whole tenant.
 */
function oneOrNone(value: string | string[] | undefined, name: string, message: string): string | undefined {
  if (Array.isArray(value)) throw new GatewayError('INVALID_REQUEST', message, { details: [{ pointer: `query:${name}`, message: 'given more than once' }] })
  if (value === '') throw new GatewayError('INVALID_REQUEST', message, { details: [{ pointer: `query:${name}`, message: `empty: leave ${name} out, or name one` }] })
  return value
}
