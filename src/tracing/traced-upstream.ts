import type { StreamTarget, UpstreamClient, UpstreamRequest } from '../upstream/upstream-client.js'
import type { ClientCallStart, RequestSpan } from './request-span.js'

/** How a request names its calls: the template of a buffered call, and that of its streamed one. */
export interface CallNames {
  /** A buffered call (a V4 call of a legacy request): its name and, for an execution sent again, its resend count. */
  buffered(request: UpstreamRequest): { name: string; resendCount?: number | undefined }
  /** The request's streamed call (native, proxy route, legacy upstream), asked only when it goes. */
  streamed(): string
  /** SPEC 5's query credential parameter, never recorded. */
  readonly queryCredential: string | null
}

/**
 * The upstream client as one traced request sees it (SPEC 17): each call carries a `traceparent`
 * naming a CLIENT span of its own, child of the request's SERVER span, which replaces the
 * client's (W3C Trace Context: the gateway takes part in the trace). `tracestate` and `baggage`
 * go on as the untraced path sends them. Made per request, only while tracing is on: with tracing
 * off the runner calls the pool directly and nothing here exists. `names` is asked only for a
 * sampled request, the one whose calls are recorded.
 */
export function traceUpstream(upstream: UpstreamClient, span: RequestSpan, names: () => CallNames): UpstreamClient {
  return span.recording ? recordCalls(upstream, span, names()) : propagateOnly(upstream, span)
}

/** A sampled request's calls: each one's CLIENT span is named, timed and ended with its answer. */
function recordCalls(upstream: UpstreamClient, span: RequestSpan, names: CallNames): UpstreamClient {
  function startCall(request: UpstreamRequest, name: string, resendCount?: number): ReturnType<RequestSpan['startCall']> {
    // SPEC 15: a comparison's V4 calls carry `x-v4gw-shadow: 1`; their spans say so (SPEC 17).
    const shadow = request.headers['x-v4gw-shadow'] === '1'
    const call: ClientCallStart = { name, method: request.method, origin: request.origin, target: request.path, queryCredential: names.queryCredential, resendCount, shadow }
    return span.startCall(call)
  }

  return {
    request(request) {
      const { name, resendCount } = names.buffered(request)
      const call = startCall(request, name, resendCount)
      return upstream.request(withTraceparent(request, call.traceparent)).then(
        function endCallSpan(response) {
          call.answered(response.statusCode)
          call.end(performance.now())
          return response
        },
        function failCallSpan(error: unknown) {
          call.failed(codeOf(error), performance.now())
          throw error
        }
      )
    },
    stream(request, target) {
      const call = startCall(request, names.streamed())
      // The body flows at the pace of both ends: the span ends with the request (request-span.ts),
      // or here when the call fails.
      const traced: StreamTarget = {
        body: target.body,
        onStart: (cancel) => target.onStart(cancel),
        onResponseStart(statusCode, headers) {
          call.answered(statusCode)
          target.onResponseStart(statusCode, headers)
        },
        onInformational: (statusCode, headers) => target.onInformational(statusCode, headers),
        onBodyBytes: (bytes, chunk) => target.onBodyBytes(bytes, chunk),
        onTrailers: (trailers) => target.onTrailers(trailers),
        onFailure(error) {
          call.failed(error.code, performance.now())
          target.onFailure(error)
        },
        onBrokenOff(error) {
          call.failed(error.code, performance.now())
          target.onBrokenOff(error)
        }
      }
      upstream.stream(withTraceparent(request, call.traceparent), traced)
    },
    close: () => upstream.close(),
    destroy: () => upstream.destroy()
  }
}

/**
 * An unsampled request's calls (SPEC 17: 99 in 100 at the default ratio): each only carries a
 * `traceparent` naming a span of its own, since nothing is recorded to name, time or end. No
 * wrapper of the stream target, so a streamed body's chunks go straight to the client.
 */
function propagateOnly(upstream: UpstreamClient, span: RequestSpan): UpstreamClient {
  return {
    request: (request) => upstream.request(withTraceparent(request, span.startCall(UNNAMED).traceparent)),
    stream: (request, target) => upstream.stream(withTraceparent(request, span.startCall(UNNAMED).traceparent), target),
    close: () => upstream.close(),
    destroy: () => upstream.destroy()
  }
}

/** What an unrecorded span's call is started with: nothing of it is read. */
const UNNAMED: ClientCallStart = { name: '', method: '', origin: '', target: '', queryCredential: null }

/**
 * The call with its own `traceparent`, written into the request's headers object rather than a
 * copy of it: copying the request and its headers per call cost 16 % of a traced legacy
 * request's CPU (bench:compare --pair, docs/performance.md). Safe because the object belongs to
 * one request (built per request by the planner: runtime-call-headers.ts, passthroughHeaders),
 * its calls go one after another, and undici serialises a request's headers when it is
 * dispatched (the pool has no connection cap, so it never queues a call's options to read
 * later): a later call's value never reaches an earlier call (a contract test holds undici to
 * that: test/integration/upstream-headers-at-dispatch.test.ts).
 */
function withTraceparent(request: UpstreamRequest, traceparent: string): UpstreamRequest {
  request.headers.traceparent = traceparent
  return request
}

/** The gateway's error code of a failed call (upstream/ fails only with a GatewayError). */
function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : 'UPSTREAM_ERROR'
}
