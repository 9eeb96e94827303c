/**
 * `Host` lower-cased with its port removed (IPv6 literals keep their brackets), and without the
 * trailing dot of a fully qualified name: `api.example.com.` is the same host, as nginx reads it.
 */
export function normalizeHost(host: string | undefined): string | undefined {
  if (host === undefined || host === '') return undefined
  const lower = host.toLowerCase()
  if (lower.startsWith('[')) {
    const end = lower.indexOf(']')
    return end === -1 ? lower : lower.slice(0, end + 1)
  }
  const colon = lower.indexOf(':')
  const name = colon === -1 ? lower : lower.slice(0, colon)
  return name.length > 1 && name.endsWith('.') ? name.slice(0, -1) : name
}
