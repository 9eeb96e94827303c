import { connectionOptions, isHopByHop } from './hop-by-hop.js'

/**
 * The `x-forwarded-*` headers a proxied request carries (SPEC 7): the client address appended to
 * any incoming `x-forwarded-for` list, the listener's scheme, and the incoming `Host`.
 */
export function forwardedHeaders(
  incoming: { 'x-forwarded-for'?: string | string[]; host?: string; connection?: string | string[] },
  clientAddress: string | undefined,
  protocol: string
): Record<string, string> {
  const address = clientAddress ?? 'unknown'
  // RFC 9110 7.6.1: a list the client's Connection names was for the hop to the gateway only.
  const list = isHopByHop('x-forwarded-for', connectionOptions(incoming.connection)) ? undefined : incoming['x-forwarded-for']
  const previous = Array.isArray(list) ? list.join(', ') : list
  const headers: Record<string, string> = {
    'x-forwarded-for': previous === undefined || previous === '' ? address : `${previous}, ${address}`,
    'x-forwarded-proto': protocol
  }
  if (incoming.host !== undefined) headers['x-forwarded-host'] = incoming.host
  return headers
}

/** The scheme the client used on this listener, for `x-forwarded-proto`. */
export function listenerProtocol(socket: object): 'http' | 'https' {
  return 'encrypted' in socket && socket.encrypted === true ? 'https' : 'http'
}
