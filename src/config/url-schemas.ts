import { z } from 'zod'
import { anyCase } from './json-schema-patterns.js'

/**
 * The URLs a config file holds. Each zod check is code (the WHATWG URL parser); its `pattern`
 * meta is the same rule for config.schema.json, written for URLs as people write them (the
 * parser's corners, a backslash for a slash or a tab inside, are left to check-config).
 * zod trims a URL before it checks it, so each pattern allows spaces around one.
 */

/** The built-in simulator as an upstream (SPEC 3, 11). */
export const EMBEDDED_UPSTREAM = 'embedded'

const HTTP_SCHEME = `${anyCase('http')}[Ss]?://`
/** Host and port, without `user:password@`. */
const BARE_AUTHORITY = '[^\\s/?#@]+'

/** Refinements still run after a failed format check (zod 4), so they parse defensively. */
export function parseUrl(value: string): URL | undefined {
  return URL.canParse(value) ? new URL(value) : undefined
}

/** Any http(s) URL: internalAdmin.urls, compared by origin. */
export const anyHttpUrl = z
  .url({ protocol: /^https?$/, error: 'Invalid URL: expected an http(s) URL' })
  .meta({ pattern: `^\\s*${HTTP_SCHEME}[^\\s/?#]+(?:[/?#]\\S*)?\\s*$` })

const httpUrl = z
  .url({ protocol: /^https?$/, error: 'Invalid URL: expected an http(s) URL' })
  .refine((value) => {
    const url = parseUrl(value)
    return url === undefined || (url.username === '' && url.password === '' && url.search === '' && url.hash === '')
  }, 'upstream URLs carry no credentials, query or fragment')

// A page sent to every client in `Link` (SPEC 5): a query or a fragment is fine, a password is not.
export const publicPageUrl = z
  .url({ protocol: /^https?$/, error: 'Invalid URL: expected an http(s) URL' })
  .refine((value) => {
    const url = parseUrl(value)
    return url === undefined || (url.username === '' && url.password === '')
  }, 'a link sent to clients carries no credentials')
  .meta({ pattern: `^\\s*${HTTP_SCHEME}${BARE_AUTHORITY}(?:[/?#]\\S*)?\\s*$` })

/**
 * SPEC 17's OTLP/HTTP collector endpoint: the whole URL the spans are posted to (path included,
 * `/v1/traces` by convention). No `user:password@`: the URL appears in logs and errors, a
 * collector's credential goes in `tracing.headers`.
 */
export const otlpEndpointUrl = z
  .url({ protocol: /^https?$/, error: 'Invalid URL: expected an http(s) URL such as http://127.0.0.1:4318/v1/traces' })
  .refine((value) => {
    const url = parseUrl(value)
    return url === undefined || (url.username === '' && url.password === '' && url.hash === '')
  }, 'the collector URL carries no credentials or fragment: put a credential in tracing.headers')
  .meta({ pattern: `^\\s*${HTTP_SCHEME}${BARE_AUTHORITY}(?:[/?][^\\s#]*)?\\s*$` })

function decodes(text: string): boolean {
  try {
    decodeURIComponent(text)
    return true
  } catch {
    return false
  }
}

/** Percent-encoded `user:password@`: a `%` starts an escape (RFC 3986 2.1). */
const ENCODED_USER_INFO = '(?:(?:[^\\s/?#@%]|%[0-9A-Fa-f]{2})*@)?'

/**
 * Redis or Valkey, plain or TLS (docs/scaling.md); credentials may sit in the URL, which is never logged,
 * so no message here quotes it. The gateway reads it as these checks do (redis-connection.ts):
 * host, port, percent-encoded user and password, and a database number as the path.
 */
export const redisUrl = z
  .url({ protocol: /^rediss?$/, error: 'Invalid URL: expected a redis:// or rediss:// URL' })
  .refine((value) => {
    const url = parseRedisUrl(value)
    return url === undefined || (decodes(url.username) && decodes(url.password))
  }, 'the user or password in the Redis URL is not valid percent-encoding (write % as %25)')
  .refine((value) => {
    const url = parseRedisUrl(value)
    return url === undefined || (url.hostname !== '' && url.search === '' && url.hash === '' && /^(\/\d*)?$/.test(url.pathname))
  }, 'a Redis URL is redis[s]://[user:password@]host[:port][/db]: no query, no fragment, a database number as its only path')
  .meta({ pattern: `^\\s*${anyCase('redis')}[Ss]?://${ENCODED_USER_INFO}${BARE_AUTHORITY}(?:/\\d*)?\\s*$` })

/** A URL of the Redis schemes; anything else is left to the scheme check, which names it. */
function parseRedisUrl(value: string): URL | undefined {
  const url = parseUrl(value)
  return url !== undefined && (url.protocol === 'redis:' || url.protocol === 'rediss:') ? url : undefined
}

// Requests keep their own path (SPEC 7), so an upstream is an origin: a path there would be dropped.
const originUrl = httpUrl
  .refine((value) => {
    const url = parseUrl(value)
    return url === undefined || url.pathname === '/'
  }, 'an upstream URL is an origin (scheme, host, port): requests keep their own path, so a path here would be ignored')
  .meta({ pattern: `^\\s*${HTTP_SCHEME}${BARE_AUTHORITY}/?\\s*$` })

export const upstreamUrl = z.union([z.literal(EMBEDDED_UPSTREAM), originUrl], {
  error: `Invalid URL: expected an http(s) URL or "${EMBEDDED_UPSTREAM}"`
})
