import { isIPv4, isIPv6 } from 'node:net'
import { bracketedIPv6, canonicalHost } from '../util/host-syntax.js'
import { normalizeHost } from '../util/normalize-host.js'

/** The names and addresses of loopback a `Host` may give, as normalizeHost leaves them (SPEC 18). */
const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['localhost', '127.0.0.1', '[::1]'])

/** `0.0.0.0`, `::` and their other spellings: a listener on one has no address of its own to name. */
export function isWildcardHost(host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
  return bare === '0.0.0.0' || (isIPv6(bare) && bracketedIPv6(bare) === '[::]')
}

/** A configured host as a `Host` header names it: lower-case, IPv6 bracketed, no trailing dot. */
function asHostHeader(host: string): string | undefined {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
  return isIPv6(bare) ? bracketedIPv6(bare) : normalizeHost(bare)
}

/**
 * Whether an `/admin/*` request's `Host` names this admin listener (SPEC 18): a loopback name or
 * address, the listener's own host when it is not a wildcard, or an `admin.allowedHosts` entry;
 * port aside, without regard to case. Anything else is refused against DNS rebinding: a web page
 * whose name an attacker points at 127.0.0.1 reaches the listener from the victim's browser,
 * which sends that name as `Host` (and is a loopback peer); no browser lets the page set `Host`
 * itself. A request with no `Host` names nothing and is refused too.
 */
export function isAdminHost(hostHeader: string | undefined, listenerHost: string | undefined, allowedHosts: readonly string[]): boolean {
  const host = normalizeHost(hostHeader)
  // A zone id in a Host (`[::1%1]`) is no URI host (RFC 3986; RFC 6874's `%25` no browser sends): it names nothing here.
  if (host === undefined || host.includes('%')) return false
  const named = canonicalHost(host)
  if (LOOPBACK_HOSTS.has(named)) return true
  if (listenerHost !== undefined && !isWildcardHost(listenerHost) && asHostHeader(listenerHost) === named) return true
  return allowedHosts.some((entry) => asHostHeader(entry) === named)
}

/** A peer on loopback: `127.0.0.0/8`, `::1`, or `::ffff:127.0.0.0/104` on a dual-stack socket (SPEC 18). */
export function isLoopbackPeer(address: string | undefined): boolean {
  if (address === undefined) return false
  if (isIPv4(address)) return address.startsWith('127.')
  if (!isIPv6(address)) return false
  // One spelling: an IPv4-mapped peer (`::ffff:127.0.0.1`, as Node gives it) becomes `[::ffff:7f00:1]`.
  const canonical = bracketedIPv6(address)
  return canonical === '[::1]' || /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/.test(canonical)
}
