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
}

type Segment = { literal: string } | { param: string }

export interface RouteMatch {
  readonly route: CompiledRoute
  readonly params: Readonly<Record<string, string>>
  /**
   * A parameter whose percent-encoding is not UTF-8 (`%FF`): the path is the route's, so the
   * request is the route's, but the translation has no text for it and refuses it (SPEC 6 400);
   * its raw text stands in `params`. The legacy upstream gets the path as sent (SPEC 14).
   */
  readonly undecodableParam?: string
}

const NO_PARAMS: Readonly<Record<string, string>> = Object.freeze({})

function compileSegments(path: string): Segment[] {
  return path
    .split('/')
    .slice(1)
    .map((part) => (part.startsWith(':') ? { param: part.slice(1) } : { literal: part }))
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
      staticMatch: undefined
    }
    if (segments.every((segment) => 'literal' in segment)) route.staticMatch = Object.freeze({ route, params: NO_PARAMS })
    return route
  })
}

/**
 * First route whose method and path match. `pathname` is the raw (still percent-encoded)
 * path; parameters are decoded, and one that does not decode is named in the match
 * (`undecodableParam`): a legacy client's path does not stop being its route's for a byte.
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
  let undecodableParam: string | undefined
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
      undecodableParam ??= segment.param
    }
  }
  return undecodableParam === undefined ? { route, params } : { route, params, undecodableParam }
}

/** Fills `:name` parameters of a proxy route's `rewrite` path (SPEC 4). */
export function buildRewrittenPath(route: CompiledRoute, params: Readonly<Record<string, string>>): string {
  if (route.rewrite === undefined) return route.path
  return route.rewrite
    .split('/')
    .map((part) => (part.startsWith(':') ? encodeURIComponent(params[part.slice(1)] ?? '') : part))
    .join('/')
}
