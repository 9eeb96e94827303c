/** RFC 6901 JSON pointers, for `legacy.fields`, `legacy.responseFields` and `sessions.sessionIdPaths`. */

function decodeToken(token: string): string {
  return token.replaceAll('~1', '/').replaceAll('~0', '~')
}

export function encodeToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1')
}

// Every pointer the gateway follows comes from its config, so the set is small; the bound
// only guards against a misuse that would feed it request data.
const TOKEN_CACHE_LIMIT = 1_024
const tokenCache = new Map<string, readonly string[]>()

/** The reference tokens of a pointer, parsed once per distinct pointer. */
export function pointerTokens(pointer: string): readonly string[] {
  let tokens = tokenCache.get(pointer)
  if (tokens === undefined) {
    tokens = Object.freeze(pointer === '' ? [] : pointer.slice(1).split('/').map(decodeToken))
    if (tokenCache.size >= TOKEN_CACHE_LIMIT) tokenCache.clear()
    tokenCache.set(pointer, tokens)
  }
  return tokens
}

function isContainer(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object'
}

/** The value at `pointer`, or undefined when any step is missing. Own properties only. */
export function getAtPointer(document: unknown, pointer: string): unknown {
  let current = document
  const tokens = pointerTokens(pointer)
  // Indexed: the tokens are frozen, and for-of over a frozen array is several times slower.
  for (let index = 0; index < tokens.length; index++) {
    const token = tokens[index] as string
    if (!isContainer(current) || !Object.hasOwn(current, token)) return undefined
    current = current[token]
  }
  return current
}

/**
 * Sets `value` at `pointer`, creating objects on the way. Returns false (and changes nothing)
 * when a step is a non-object. Uses defineProperty so that "__proto__" stays a plain key.
 */
export function setAtPointer(document: Record<string, unknown>, pointer: string, value: unknown): boolean {
  const tokens = pointerTokens(pointer)
  const last = tokens[tokens.length - 1]
  if (last === undefined) return false
  let current: Record<string, unknown> = document
  for (let index = 0; index < tokens.length - 1; index++) {
    const token = tokens[index] as string
    const next = Object.hasOwn(current, token) ? current[token] : undefined
    if (next === undefined) {
      const created: Record<string, unknown> = {}
      Object.defineProperty(current, token, { value: created, enumerable: true, writable: true, configurable: true })
      current = created
    } else if (isContainer(next) && !Array.isArray(next)) {
      current = next
    } else {
      return false
    }
  }
  Object.defineProperty(current, last, { value, enumerable: true, writable: true, configurable: true })
  return true
}
