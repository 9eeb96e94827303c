import { isIPv6 } from 'node:net'

/**
 * RFC 9110 7.2: `Host = uri-host [ ":" port ]`, with RFC 3986's `host` (an IP literal in
 * brackets, or a reg-name, which an IPv4 address also is) and `port = *DIGIT`. One colon at
 * most outside the brackets, digits alone after it, no userinfo, no space, no byte outside
 * ASCII. An empty value is valid (a target without authority), as are a trailing dot and an
 * empty or out-of-range port (RFC 3986 bounds neither).
 */
const REG_NAME_HOST = /^(?:[\w.~!$&'()*+,;=-]|%[\dA-Fa-f]{2})*(?::\d*)?$/
const IP_LITERAL_HOST = /^\[([\w.:~!$&'()*+,;=%-]+)\](?::\d*)?$/
/** RFC 3986 IPvFuture; otherwise an IP literal is an IPv6 address, with an RFC 6874 zone (`%25`) if any. */
const IP_FUTURE = /^v[\dA-Fa-f]+\.[\w.:~!$&'()*+,;=-]+$/i
const ZONE = /^%25(?:[\w.~-]|%[\dA-Fa-f]{2})+$/

/**
 * An IPv6 address in one spelling, bracketed as in a `Host` (`[::1]`, not `[0:0::1]`), without
 * its zone id: `isIPv6` accepts `fe80::1%eth0` (a link-local peer, a configured host), the URL
 * parser does not, and the zone does not change which address it is.
 */
export function bracketedIPv6(address: string): string {
  const zone = address.indexOf('%')
  return new URL(`http://[${zone < 0 ? address : address.slice(0, zone)}]`).hostname
}

/** A host as normalizeHost leaves it, an IPv6 literal in one spelling (`[0:0::1]` is `[::1]`); any other unchanged. */
export function canonicalHost(host: string): string {
  if (host.charCodeAt(0) !== 0x5b || !host.endsWith(']')) return host
  const inner = host.slice(1, -1)
  const zone = inner.indexOf('%')
  return isIPv6(zone < 0 ? inner : inner.slice(0, zone)) ? bracketedIPv6(inner) : host
}

/** Whether a Host value is `uri-host [ ":" port ]` (RFC 9110 7.2, RFC 3986 3.2.2-3.2.3). */
export function isValidHost(host: string): boolean {
  // One test and no allocation for a name; an IP literal (`[`) is rare enough to be taken apart.
  if (host.charCodeAt(0) !== 0x5b) return REG_NAME_HOST.test(host)
  const literal = IP_LITERAL_HOST.exec(host)?.[1]
  if (literal === undefined) return false
  if (IP_FUTURE.test(literal)) return true
  const zone = literal.indexOf('%')
  return isIPv6(zone === -1 ? literal : literal.slice(0, zone)) && (zone === -1 || ZONE.test(literal.slice(zone)))
}
