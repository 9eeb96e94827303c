import replyFrom from '@fastify/reply-from'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Dispatcher } from 'undici'
import { mapUpstreamError } from '../upstream/map-upstream-error.js'
import { stripHopByHop } from './hop-by-hop.js'

export interface ForwardOptions {
  origin: string
  /** The upstream path, without query. */
  path: string
  /** The upstream query without "?"; "" for none. */
  query: string
  /** No response headers, or no body progress, for this long is a 504 (SPEC 6). */
  timeoutMs: number
  /** Called on the request headers after hop-by-hop removal and `x-forwarded-*`. */
  rewriteHeaders?: (headers: Record<string, string | string[] | undefined>) => Record<string, string | string[] | undefined>
}

/** Registers the streaming engine on the shared undici pool (SPEC 7: bodies are never buffered). */
export async function registerPassthrough(app: FastifyInstance, dispatcher: Dispatcher): Promise<void> {
  await app.register(replyFrom, { undici: dispatcher as never, disableRequestLogging: true })
}

/** Streams the request to `origin` and the answer back, both ways without buffering (SPEC 7). */
export function forwardStream(request: FastifyRequest, reply: FastifyReply, options: ForwardOptions): FastifyReply {
  return reply.from(options.path, {
    timeout: options.timeoutMs,
    // Never retry: an upstream 503 is the backend's answer and passes through once (SPEC 7).
    // reply-from otherwise re-sends body-less requests on 503, and reads 0 retries as "default".
    retryDelay: () => null,
    getUpstream: () => options.origin,
    queryString: () => options.query,
    rewriteRequestHeaders: function addForwardingHeaders(_request, headers) {
      const forwarded = stripHopByHop(headers) as Record<string, string | string[] | undefined>
      forwarded['x-forwarded-for'] = appendForwardedFor(request.headers['x-forwarded-for'], request.socket.remoteAddress)
      forwarded['x-forwarded-proto'] = request.protocol
      if (request.headers.host !== undefined) forwarded['x-forwarded-host'] = request.headers.host
      // SPEC 6: the resolved id (the client's when valid, else a new one) goes to every upstream call.
      forwarded['x-request-id'] = request.id
      return (options.rewriteHeaders?.(forwarded) ?? forwarded) as typeof headers
    },
    rewriteHeaders: function stripResponseHopByHop(headers) {
      return stripHopByHop(headers)
    },
    onError: function answerUpstreamFailure(failedReply, { error }) {
      failedReply.send(mapUpstreamError(error))
    }
  })
}

function appendForwardedFor(incoming: string | string[] | undefined, clientAddress: string | undefined): string {
  const address = clientAddress ?? 'unknown'
  if (incoming === undefined || incoming === '') return address
  return `${Array.isArray(incoming) ? incoming.join(', ') : incoming}, ${address}`
}
