import { Writable } from 'node:stream'
import { Agent, type Dispatcher } from 'undici'
import { describe, expect, it } from 'vitest'
import { createUpstreamClient, type StreamTarget, type UpstreamClient, type UpstreamRequest } from '../../src/upstream/upstream-client.js'
import { answerAfter, startRecordingUpstream } from '../helpers/recording-upstream.js'
import { ownedByTest } from '../helpers/teardown.js'

/*
 * A contract with undici that tracing/traced-upstream.ts relies on: a request's headers are read
 * when it is dispatched, so writing the next call's `traceparent` into the same headers object
 * afterwards never changes what an earlier call sends, even one still queued for a connection.
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

  it('a call queued behind a busy connection still sends the headers it had when dispatched', async () => {
    const upstream = await startRecordingUpstream(answerAfter(100, { ok: true }))
    const agent = await ownedByTest('agent', async () => new Agent({ connections: 1 }), (started) => started.destroy())
    const headers: Record<string, string> = { traceparent: 'first' }
    const send = (): Promise<Dispatcher.ResponseData> => agent.request({ origin: upstream.url, method: 'POST', path: '/', headers, body: '{}' })
    const answers = [send()]
    headers.traceparent = 'second'
    answers.push(send())
    headers.traceparent = 'third'
    for (const answer of await Promise.all(answers)) await answer.body.text()
    expect(upstream.requests.map((recorded) => recorded.headers.traceparent)).toEqual(['first', 'second'])
  })
})
