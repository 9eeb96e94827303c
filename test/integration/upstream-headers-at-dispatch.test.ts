import { Writable } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createUpstreamClient, type StreamTarget, type UpstreamClient, type UpstreamRequest } from '../../src/upstream/upstream-client.js'
import { answerAfter, startRecordingUpstream } from '../helpers/recording-upstream.js'
import { ownedByTest } from '../helpers/teardown.js'

/*
 * A contract with undici that tracing/traced-upstream.ts relies on: a request's headers are read
 * when it is dispatched, so writing the next call's `traceparent` into the same headers object
 * afterwards never changes what an earlier call sends, even one still waiting for its answer.
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
        onBrokenOff: reject
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
})
