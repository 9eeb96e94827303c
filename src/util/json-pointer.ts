/** RFC 6901 JSON pointers, for `legacy.fields`, `legacy.responseFields` and `sessions.sessionIdPaths`. */

function decodeToken(token: string): string {
  return token.replaceAll('~1', '/').replaceAll('~0', '~')
}

export function encodeToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1')
}

export function pointerTokens(pointer: string): string[] {
  return pointer === '' ? [] : pointer.slice(1).split('/').map(decodeToken)
}

function isContainer(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object'
}

/** The value at `pointer`, or undefined when any step is missing. Own properties only. */
export function getAtPointer(document: unknown, pointer: string): unknown {
  let current = document
  for (const token of pointerTokens(pointer)) {
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
  const last = tokens.pop()
  if (last === undefined) return false
  let current: Record<string, unknown> = document
  for (const token of tokens) {
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
