// RFC 9110 7.6.1: hop-by-hop fields are meant for one connection and are never forwarded,
// nor are the fields that a Connection header names.
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade'])

const NO_OPTIONS: readonly string[] = Object.freeze([])

/** The field names a `Connection` header lists (RFC 9110 7.6.1), lower-cased. */
export function connectionOptions(connection: string | string[] | undefined): readonly string[] {
  // The common values name no field that is not hop-by-hop already: nothing to parse per answer.
  if (connection === undefined || connection === 'keep-alive' || connection === 'close') return NO_OPTIONS
  return (Array.isArray(connection) ? connection.join(',') : connection)
    .toLowerCase()
    .split(',')
    .map((name) => name.trim())
}

export function isHopByHop(name: string, connectionListed: readonly string[]): boolean {
  return HOP_BY_HOP.has(name) || (connectionListed.length > 0 && connectionListed.includes(name))
}

const NOTHING_ELSE: ReadonlySet<string> = new Set()

/**
 * A copy of `headers` without the hop-by-hop fields and without `alsoLeftOut` (lower-case
 * names). Leaving a field out of the copy, rather than deleting it after, keeps the object in
 * V8's fast shape, which every later reader of the headers (Node, undici) walks.
 */
export function stripHopByHop<T extends Record<string, unknown>>(headers: T, alsoLeftOut: ReadonlySet<string> = NOTHING_ELSE): T {
  const named = connectionOptions(headers.connection as string | string[] | undefined)
  const result: Record<string, unknown> = {}
  for (const name in headers) {
    const value = headers[name]
    if (value !== undefined && !isHopByHop(name, named) && !alsoLeftOut.has(name)) result[name] = value
  }
  return result as T
}
