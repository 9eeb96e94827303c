import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import { AccessRecord } from '../observability/access-record.js'
import { resolveRequestId } from '../observability/request-id.js'
import type { RequestSpan } from '../tracing/request-span.js'
import type { CallTracer, CancelScope } from '../upstream/upstream-client.js'
import { listenerProtocol } from '../util/forwarded-headers.js'
import { connectionMemo } from './connection-memo.js'
import type { RequestHead } from './request-head.js'

/**
 * One request on the traffic listener, from its first byte to its 'close', as the kernel owns
 * it: the Node request and response, the request's immutable head, the headers the gateway puts
 * on whatever answer leaves (its own error or the upstream's), its cancel scope (a client going
 * away cancels its upstream call) and the access record the steps fill. The lifecycle (the
 * in-flight slot, the body-stall watch, the end) is the kernel's alone (traffic-kernel.ts).
 */
export class Exchange implements CancelScope {
  readonly head: RequestHead
  /** Headers on every answer to this request, set before its answer is known. */
  readonly answerHeaders: OutgoingHttpHeaders = {}
  readonly record = new AccessRecord()
  cancelled = false
  cancel: (() => void) | undefined = undefined
  /** Answered because its body stopped arriving (408) or broke (400): what fails after that is not answered again. */
  bodyStalled = false
  /**
   * The body-stall watch's (body-stall.ts): the request's place in its list (-1: not watched), the
   * body's last progress, and the limit of the config the request started with (SPEC 8).
   */
  bodyWatchIndex = -1
  bodyBytesSeen = 0
  bodyProgressAt = 0
  bodyStallLimitMs = 0
  /** SPEC 17: the request's SERVER span, while tracing is on (traffic/traced-requests.ts); never made otherwise. */
  span: RequestSpan | undefined = undefined
  /** SPEC 17: what traces the request's upstream calls, while tracing is on (the span's, once planned). */
  callTracer: CallTracer | undefined = undefined
  /** SPEC 16: work that goes on after the client left (a keyed request's calls); SPEC 10's in-flight slot stays taken until it ends. */
  outlivesClient: Promise<unknown> | undefined = undefined
  /**
   * Calls that go on after the client left without being its outcome: a `sessions.start` others
   * may share (SPEC 4 step 3) is not cancelled with its client. The request ends when its client
   * leaves, but SPEC 10's in-flight slot stays taken until these end: a client that sends and
   * hangs up cannot start calls past `maxInFlight`.
   */
  callsUnderWay: Promise<unknown> | undefined = undefined

  /**
   * The request's connection, kept: undici sets a streamed request body's `socket` to null when it
   * is done with it, and an answer queued behind a pipelined one has none yet.
   */
  readonly connection: IncomingMessage['socket']

  constructor(
    readonly request: IncomingMessage,
    readonly response: ServerResponse
  ) {
    const socket = request.socket
    this.connection = socket
    this.head = {
      startedAt: performance.now(),
      now: Date.now(),
      // SPEC 6: the client's `x-request-id` when valid, else a new one.
      requestId: resolveRequestId(request.headers['x-request-id']),
      method: request.method as string,
      url: request.url as string,
      httpVersion: request.httpVersion,
      headers: request.headers,
      rawHeaders: request.rawHeaders,
      clientAddress: socket.remoteAddress,
      protocol: listenerProtocol(socket),
      memo: connectionMemo(socket)
    }
  }

  get id(): string {
    return this.head.requestId
  }

  /**
   * Whether the client broke off or went away (or the gateway cut its connection, at the end of
   * the grace period): then no failure is the gateway's. Its kept connection is read, not
   * `request.socket`, which undici sets to null once it has sent a small body: an upstream call
   * cut with its client's connection was otherwise logged as an upstream failure or not, by which
   * of the two closed first.
   */
  get clientGone(): boolean {
    return this.cancelled || this.connection.destroyed || clientWentAway(this.request)
  }
}

/**
 * Whether the client broke off its request or closed its connection. Not `request.destroyed`
 * alone: Node destroys a request once its body has been read to the end, which every legacy
 * call's has by the time its upstream can fail.
 */
export function clientWentAway(request: IncomingMessage): boolean {
  return (request.destroyed && !request.complete) || request.socket?.destroyed === true
}
