import { GatewayError } from '../errors/registry.js'

/**
 * A legacy body as the JSON text of a V4 call. JSON.parse reads nesting of any depth, but
 * JSON.stringify recurses and runs out of stack a few thousand levels down: such a body is the
 * client's to fix, a 400, and is refused before any V4 call.
 */
export function toJsonBody(body: unknown): string {
  try {
    return JSON.stringify(body)
  } catch (error) {
    if (!(error instanceof RangeError)) throw error
    throw nestedTooDeeply()
  }
}

/** The 400 for a body that a recursion over it (JSON.stringify, a fingerprint) ran out of stack on. */
export function nestedTooDeeply(): GatewayError {
  return new GatewayError('INVALID_REQUEST', 'request body is nested too deeply to pass on', { details: [{ pointer: '', message: 'nested too deeply' }] })
}
