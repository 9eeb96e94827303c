import { describe, expect, it } from 'vitest'
import type { SessionExecuteCalls, V4Call } from '../../../src/legacy/legacy-calls.js'
import { runLegacyCalls, type LegacyCallTrace } from '../../../src/legacy/run-legacy-call.js'
import { createSessionMap } from '../../../src/sessions/session-map.js'
import { createMemorySessionStore } from '../../../src/sessions/session-store.js'
import type { UpstreamClient, UpstreamRequest, UpstreamResponse } from '../../../src/upstream/upstream-client.js'

/**
 * What a request waits on while its session is started by another: a comparison let go at
 * `shadow.timeoutMs` then made no call of its own to count (SPEC 15, 17). The upstream is a
 * function here because the case is a `sessions.start` that never settles, as one still
 * connecting (which undici cannot cut) does; the loopback tests cover the rest.
 */
const call = (path: string): V4Call => ({ method: 'POST', path, headers: {}, body: '{}' })

function calls(): SessionExecuteCalls {
  return {
    action: 'session-execute',
    tenant: 'acme',
    sessionKey: 'acme\0state',
    stateKey: 'state',
    start: () => call('/v4/sessions.start'),
    execution: (sessionId) => call(`/v4/sessions/${sessionId}/executions.execute`),
    staleStatuses: [404, 410],
    sessionIdPaths: ['/sessionId']
  }
}

const json = (statusCode: number, body: unknown): UpstreamResponse => ({ statusCode, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify(body)) })

function trace(): LegacyCallTrace {
  return { upstreamMs: undefined, v4Path: undefined, sessionOutcome: undefined }
}

describe('a request waiting on a sessions.start another request sent (run-legacy-call.ts)', () => {
  it('is marked waitsOnSharedStart while it waits, on a first start and on the start after a stale session, and the sender never is', async () => {
    const starts: Array<(response: UpstreamResponse) => void> = []
    let sessions = 0
    let firstSessionRuns = 0
    const upstream: UpstreamClient = {
      request: (request: UpstreamRequest) => {
        if (request.path === '/v4/sessions.start') return new Promise((resolve) => starts.push(resolve))
        // The first session serves its first two executions, then is gone (stale); the second serves.
        const stale = request.path.includes('ses_1') && ++firstSessionRuns > 2
        return Promise.resolve(stale ? json(404, { error: { code: 'SESSION_NOT_FOUND' } }) : json(200, { output: 1 }))
      },
      stream: () => undefined,
      close: () => Promise.resolve(),
      destroy: () => Promise.resolve()
    }
    const deps = { upstream, sessions: createSessionMap<UpstreamResponse>(createMemorySessionStore({ maxEntries: 10, ttlMs: 60_000 })) }
    const target = (of: LegacyCallTrace) => ({ origin: 'http://v4.test', timeoutMs: 1_000, cancelScope: { cancelled: false, cancel: undefined }, trace: of, tracer: undefined })
    const turn = () => new Promise((resolve) => setImmediate(resolve))

    // A first start, sent by one request, another waiting on it.
    const [sender, waiter] = [trace(), trace()]
    const first = [runLegacyCalls(calls(), target(sender), deps), runLegacyCalls(calls(), target(waiter), deps)]
    await turn()
    expect(starts).toHaveLength(1)
    expect([sender.waitsOnSharedStart, waiter.waitsOnSharedStart]).toEqual([false, true])
    starts[0]?.(json(201, { sessionId: `ses_${++sessions}` }))
    expect((await Promise.all(first)).map((answer) => answer.response.statusCode)).toEqual([200, 200])
    expect([sender.waitsOnSharedStart, waiter.waitsOnSharedStart]).toEqual([false, false])

    // Two requests find the session mapped, meet it stale, and replace it: one sends the start, the other waits on it.
    const [one, other] = [trace(), trace()]
    const retried = [runLegacyCalls(calls(), target(one), deps), runLegacyCalls(calls(), target(other), deps)]
    for (let turns = 0; turns < 10 && starts.length < 2; turns++) await turn()
    await turn()
    expect(starts).toHaveLength(2)
    expect([one.waitsOnSharedStart, other.waitsOnSharedStart].sort()).toEqual([false, true])
    starts[1]?.(json(201, { sessionId: `ses_${++sessions}` }))
    expect((await Promise.all(retried)).map((answer) => answer.response.statusCode)).toEqual([200, 200])
    expect([one.sessionOutcome, other.sessionOutcome]).toEqual(['stale-retry', 'stale-retry'])
  })
})

describe('a mapped session answered 401 (run-legacy-call.ts)', () => {
  it('is answered without waiting on the shared store\'s delete, its entry gone from this replica at once', async () => {
    let starts = 0
    const upstream: UpstreamClient = {
      request: (request: UpstreamRequest) =>
        Promise.resolve(request.path === '/v4/sessions.start' ? json(201, { sessionId: `ses_${++starts}` }) : json(401, { error: { code: 'AUTH_INVALID' } })),
      stream: () => undefined,
      close: () => Promise.resolve(),
      destroy: () => Promise.resolve()
    }
    // The shared delete of a Redis that hangs: the local copy goes, the store's answer never comes.
    const memory = createMemorySessionStore({ maxEntries: 10, ttlMs: 60_000 })
    const store = { ...memory, deleteIfSession: (key: string, sessionId: string, tenant: string) => (memory.deleteIfSession(key, sessionId, tenant), new Promise<boolean>(() => undefined)) }
    const deps = { upstream, sessions: createSessionMap<UpstreamResponse>(store) }
    const target = { origin: 'http://v4.test', timeoutMs: 1_000, cancelScope: { cancelled: false, cancel: undefined }, trace: trace(), tracer: undefined }
    expect((await runLegacyCalls(calls(), target, deps)).response.statusCode).toBe(401)
    // The next request starts a new session: the entry was gone before the answer.
    expect((await runLegacyCalls(calls(), { ...target, trace: trace() }, deps)).response.statusCode).toBe(401)
    expect(starts).toBe(2)
  })
})
