import type { LegacyAction, LegacyRouteConfig } from '../config/schema.js'

/** A legacy route with its path split once at config time, so matching allocates nothing but params. */
export interface CompiledRoute {
  readonly method: string
  readonly path: string
  /** `METHOD /path`, as logs, metrics and the migration report name the route. */
  readonly label: string
  readonly action: LegacyAction
  readonly stateKey: string | undefined
  readonly rewrite: string | undefined
  readonly segments: readonly Segment[]
  /** A route without parameters matches one path only: its match, made once. */
  readonly staticMatch: RouteMatch | undefined
  /** The parameters the translation reads as text: its state key's, its rewrite's. */
  readonly readParams: ReadonlySet<string>
}

type Segment = { literal: string } | { param: string }

export interface RouteMatch {
  readonly route: CompiledRoute
  readonly params: Readonly<Record<string, string>>
  /**
   * The parameters whose percent-encoding is not UTF-8 (`%FF`), in path order: the path is the
   * route's, so the request is the route's, but their raw (still encoded) text stands in
   * `params`, and the translation refuses one it reads as text (SPEC 6 400; plan-request.ts).
   * The legacy upstream gets the path as sent (SPEC 14).
   */
  readonly undecodable?: readonly string[]
}

const NO_PARAMS: Readonly<Record<string, string>> = Object.freeze({})

function compileSegments(path: string): Segment[] {
  return path
    .split('/')
    .slice(1)
    .map((part) => (part.startsWith(':') ? { param: part.slice(1) } : { literal: part }))
}

function readParams(config: LegacyRouteConfig): Set<string> {
  const read = new Set<string>()
  if (config.stateKey?.startsWith('param:') === true) read.add(config.stateKey.slice('param:'.length))
  for (const part of config.rewrite?.split('/') ?? []) if (part.startsWith(':')) read.add(part.slice(1))
  return read
}

export function compileRoutes(routes: readonly LegacyRouteConfig[]): CompiledRoute[] {
  return routes.map((config) => {
    const segments = compileSegments(config.path)
    const route: { -readonly [K in keyof CompiledRoute]: CompiledRoute[K] } = {
      method: config.method,
      path: config.path,
      label: `${config.method} ${config.path}`,
      action: config.action,
      stateKey: config.stateKey,
      rewrite: config.rewrite,
      segments,
      staticMatch: undefined,
      readParams: readParams(config)
    }
    if (segments.every((segment) => 'literal' in segment)) route.staticMatch = Object.freeze({ route, params: NO_PARAMS })
    return route
  })
}

/**
 * First route whose method and path match. `pathname` is the raw (still percent-encoded)
 * path; parameters are decoded, and one that does not decode is named in the match
 * (`undecodable`): a legacy client's path does not stop being its route's for a byte.
 */
export function matchRoute(routes: readonly CompiledRoute[], method: string, pathname: string): RouteMatch | undefined {
  // A route without parameters is one compare (its literal segments joined are its path). Count
  // and split only when a route with parameters has this method and as many segments: a native
  // request (`/v4/…`) usually meets none, and this runs on every request.
  let segmentCount = -1
  let parts: string[] | undefined
  // Indexed: the routes are frozen, and for-of over a frozen array is several times slower.
  for (let index = 0; index < routes.length; index++) {
    const route = routes[index] as CompiledRoute
    if (route.method !== method) continue
    if (route.staticMatch !== undefined) {
      if (route.path === pathname) return route.staticMatch
      continue
    }
    if (segmentCount === -1) segmentCount = countSlashes(pathname)
    if (route.segments.length !== segmentCount) continue
    parts ??= pathname.split('/')
    const match = matchSegments(route, parts)
    if (match !== undefined) return match
  }
  return undefined
}

/** The segments of a path that starts with `/`: what `split('/').length - 1` counts. */
function countSlashes(path: string): number {
  let count = 0
  for (let index = 0; index < path.length; index++) if (path.charCodeAt(index) === 0x2f) count++
  return count
}

function matchSegments(route: CompiledRoute, parts: string[]): RouteMatch | undefined {
  const segments = route.segments
  const params: Record<string, string> = {}
  let undecodable: string[] | undefined
  for (let index = 0; index < segments.length; index++) {
    const segment = segments[index] as Segment
    const part = parts[index + 1] as string
    if ('literal' in segment) {
      if (segment.literal !== part) return undefined
      continue
    }
    if (part === '') return undefined
    try {
      params[segment.param] = decodeURIComponent(part)
    } catch {
      params[segment.param] = part
      ;(undecodable ??= []).push(segment.param)
    }
  }
  return undecodable === undefined ? { route, params } : { route, params, undecodable }
}

/** Fills `:name` parameters of a proxy route's `rewrite` path (SPEC 4). */
export function buildRewrittenPath(route: CompiledRoute, params: Readonly<Record<string, string>>, undecodable?: readonly string[]): string {
  if (route.rewrite === undefined) return route.path
  return route.rewrite
    .split('/')
    .map((part) => {
      if (!part.startsWith(':')) return part
      const name = part.slice(1)
      // One that did not decode is its raw, still encoded, text: encoded again it names another path.
      return undecodable?.includes(name) === true ? (params[name] ?? '') : encodeURIComponent(params[name] ?? '')
    })
    .join('/')
}
