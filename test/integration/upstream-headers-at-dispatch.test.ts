import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createUpstreamClient, type CallTracer, type StreamTarget, type UpstreamClient, type UpstreamRequest } from '../../src/upstream/upstream-client.js'
import { answerAfter, startRecordingUpstream } from '../helpers/recording-upstream.js'
import { ownedByTest } from '../helpers/teardown.js'

/*
 * A contract with undici that the upstream client's tracing relies on (traceCall in
 * upstream-client.ts): a request's headers are read when it is dispatched, so writing the next
 * call's `traceparent` into the same headers object afterwards never changes what an earlier
 * call sends, even one still waiting for its answer.
 */

function call(origin: string, traceparent: string): UpstreamRequest {
  return { origin, method: 'POST', path: '/v4/execute', headers: { 'content-type': 'application/json', traceparent }, body: '{}', timeoutMs: 5_000 }
}

function client(): Promise<UpstreamClient> {
  return ownedByTest('upstream client', async () => createUpstreamClient({ connectTimeoutMs: 5_000 }), (started) => started.destroy())
}

describe('undici reads request headers at dispatch', () => {
  it('a buffered call sends the headers it had when dispatched', async () => {
    const upstream = await startRecordingUpstream()
    const upstreamClient = await client()
    const request = call(upstream.url, 'first')
    const answered = upstreamClient.request(request)
    request.headers.traceparent = 'second'
    await answered
    expect(upstream.requests.map((recorded) => recorded.headers.traceparent)).toEqual(['first'])
  })

  it('a streamed call sends the headers it had when dispatched', async () => {
    const upstream = await startRecordingUpstream()
    const upstreamClient = await client()
    const request = call(upstream.url, 'first')
    const done = new Promise<void>((resolve, reject) => {
      const target: StreamTarget = {
        body: new Writable({ write: (_chunk, _encoding, next) => next(), final: (finished) => (finished(), resolve()) }),
        onStart: () => {},
        onResponseStart: () => {},
        onInformational: () => {},
        onBodyBytes: () => {},
        onTrailers: () => {},
        onFailure: reject,
        onBrokenOff: reject,
        onReaderStalled: () => reject(new Error('reader stalled'))
      }
      upstreamClient.stream(request, target)
    })
    request.headers.traceparent = 'second'
    await done
    expect(upstream.requests.map((recorded) => recorded.headers.traceparent)).toEqual(['first'])
  })

  it('calls dispatched while earlier ones are still under way each send the headers they had when dispatched', async () => {
    // The gateway's pool has no connection cap (upstream-client.ts): undici's Pool then never
    // queues a call's raw options (it would read their headers later), it opens a connection.
    const upstream = await startRecordingUpstream(answerAfter(100, { ok: true }))
    const upstreamClient = await client()
    const request = call(upstream.url, 'call-0')
    const answers = []
    for (let index = 0; index < 5; index++) {
      request.headers.traceparent = `call-${index}`
      answers.push(upstreamClient.request(request))
    }
    request.headers.traceparent = 'after'
    await Promise.all(answers)
    expect(upstream.requests.map((recorded) => recorded.headers.traceparent).sort()).toEqual(['call-0', 'call-1', 'call-2', 'call-3', 'call-4'])
  })

  it('with a tracer, each call carries the traceparent of its own span, also five in flight, and its span hears the answer', async () => {
    const upstream = await startRecordingUpstream(answerAfter(100, { ok: true }))
    const upstreamClient = await client()
    const heard: string[] = []
    let calls = 0
    const tracer: CallTracer = {
      traceCall(request, streamed) {
        const traceparent = `call-${calls++}-${streamed ? 'streamed' : 'buffered'}`
        return {
          traceparent,
          answered: (statusCode) => heard.push(`${traceparent} answered ${statusCode}`),
          failed: (errorCode) => heard.push(`${traceparent} failed ${errorCode}`),
          end: () => heard.push(`${traceparent} ended`)
        }
      }
    }
    const request = { ...call(upstream.url, 'the client sent this'), tracer }
    await Promise.all(Array.from({ length: 5 }, () => upstreamClient.request(request)))
    expect(upstream.requests.map((recorded) => recorded.headers.traceparent).sort()).toEqual(['call-0-buffered', 'call-1-buffered', 'call-2-buffered', 'call-3-buffered', 'call-4-buffered'])
    expect(heard.filter((line) => line.startsWith('call-0-'))).toEqual(['call-0-buffered answered 200', 'call-0-buffered ended'])

    const refused = upstreamClient.request({ ...request, origin: 'http://127.0.0.1:9' })
    await expect(refused).rejects.toMatchObject({ code: 'UPSTREAM_UNAVAILABLE' })
    expect(heard.at(-1)).toBe('call-5-buffered failed UPSTREAM_UNAVAILABLE')
  })
})
