// RFC 9110 7.6.1: hop-by-hop fields are meant for one connection and are never forwarded,
// nor are the fields that a Connection header names.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'])

export function stripHopByHop<T extends Record<string, unknown>>(headers: T): T {
  const connection = headers.connection
  const named = typeof connection === 'string' ? connection.toLowerCase().split(',').map((name) => name.trim()) : []
  const result: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name) && !named.includes(name)) result[name] = value
  }
  return result as T
}
