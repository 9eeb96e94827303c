import { USER_AGENT_MAX_CHARS } from '../observability/access-log.js'

/**
 * The request target's path, never its query or authority: a credential can ride in the query
 * (SPEC 5, 17) and in an authority's userinfo (`http://user:secret@host/…`, `//user:secret@host/…`,
 * refused, but logged). Undefined for a target with no path (`*`, `host:port`).
 */
export function pathOf(url: string): string | undefined {
  const end = url.search(/[?#]/)
  const target = end === -1 ? url : url.slice(0, end)
  if (target.startsWith('/') && !target.startsWith('//')) return target
  const authority = /^(?:[A-Za-z][A-Za-z0-9+.-]*:)?\/\/[^/]*/.exec(target)
  if (authority === null) return undefined
  return target.slice(authority[0].length) || '/'
}

/** SPEC 17: the user agent as the access line and the span hold it, at most USER_AGENT_MAX_CHARS. */
export function userAgentOf(value: string | undefined): string | undefined {
  return value === undefined || value.length <= USER_AGENT_MAX_CHARS ? value : value.slice(0, USER_AGENT_MAX_CHARS)
}
