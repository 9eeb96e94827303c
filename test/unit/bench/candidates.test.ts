import { createHash } from 'node:crypto'
import { describe, expect, it } from 'vitest'
// @ts-expect-error -- a plain .mjs script of the benchmark, without types
import { CANDIDATES } from '../../../bench/candidates.mjs'
import { startRecordingUpstream } from '../../helpers/recording-upstream.js'

type Candidate = { name: string; load: { path: string }; check: (name: string, baseUrl: string, load: unknown) => Promise<void> }
const candidates = CANDIDATES as Candidate[]

/** A loopback server whose answer to every call is `answer(body)`, closed when the test finishes; resolves with its URL. */
async function serve(answer: (body: string) => { status: number; body: unknown; sessionId?: string }, { echoRequestId = true } = {}): Promise<string> {
  // As a gateway with SPEC 16 on answers a key it has seen: the stored answer, replayed.
  const keysSeen = new Set<string>()
  const upstream = await startRecordingUpstream((request, response) => {
    const { status, body, sessionId } = answer(request.body.toString('utf8'))
    const key = request.headers['idempotency-key']
    const replayed = typeof key === 'string' && keysSeen.has(key)
    if (typeof key === 'string') keysSeen.add(key)
    // As the gateway answers a legacy call (SPEC 6): the request's own id back.
    const requestId = echoRequestId ? request.headers['x-request-id'] : undefined
    response.writeHead(status, {
      'content-type': 'application/json',
      ...(sessionId === undefined ? {} : { 'x-v4-session-id': sessionId }),
      ...(replayed ? { 'idempotent-replayed': 'true' } : {}),
      ...(typeof requestId === 'string' ? { 'x-request-id': requestId } : {})
    })
    response.end(JSON.stringify(body))
  })
  return upstream.url
}

/*
 * The bench (docs/performance.md) checks each candidate's first answer before loading it. A run of
 * bench/run.mjs itself, with the processes it starts, is test/integration/bench-run.test.ts.
 */
describe('bench/candidates.mjs first-answer checks', () => {
  it.each(candidates.map((candidate) => [candidate.name, candidate] as const))('%s refuses an answer that is not an execution', async (name, candidate) => {
    const url = await serve(() => ({ status: 200, body: { error: { code: 'NOT_AN_EXECUTION' } } }))
    await expect(candidate.check(name, url, candidate.load)).rejects.toThrow(`${name}: first answer is wrong`)
  })

  it.each(candidates.map((candidate) => [candidate.name, candidate] as const))('%s accepts an execution answer, with a session per state key', async (name, candidate) => {
    // The same body (state key) gets the same session, another one another: a hit and a miss as the gateway answers them.
    const url = await serve((body) => ({ status: 200, body: { output: 'ok', meta: { requestId: 'r' } }, sessionId: `ses_${createHash('sha256').update(body).digest('hex').slice(0, 12)}` }))
    await expect(candidate.check(name, url, candidate.load)).resolves.toBeUndefined()
  })

  const translated = candidates.filter((candidate) => /^gateway-execute(-traced-(1pct|all))?$/.test(candidate.name))
  it.each(translated.map((candidate) => [candidate.name, candidate] as const))('%s refuses an execution answer streamed through untranslated (no x-request-id of its own)', async (name, candidate) => {
    const url = await serve(() => ({ status: 200, body: { output: 'ok', meta: { requestId: 'r' } } }), { echoRequestId: false })
    await expect(candidate.check(name, url, candidate.load)).rejects.toThrow(`${name}: first answer is wrong (expected a translated answer`)
  })
  it('checks the three translated execute rows that way', () => {
    expect(translated.map((candidate) => candidate.name)).toEqual(['gateway-execute', 'gateway-execute-traced-1pct', 'gateway-execute-traced-all'])
  })
})
