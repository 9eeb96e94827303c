import type { ServerResponse } from 'node:http'
import { useRecordingUpstream, type RecordedRequest } from './recording-upstream.js'

/**
 * A recording V4 upstream for every test of the enclosing describe: sessions.start gives s1, s2,
 * …; an execution answers 404 SESSION_NOT_FOUND while `staleOnce` holds its session id (SPEC 4's
 * stale session), else 200.
 */
export function useStaleableV4Upstream() {
  let sessions = 0
  const staleOnce = new Set<string>()
  const upstream = useRecordingUpstream((request: RecordedRequest, response: ServerResponse) => {
    response.setHeader('content-type', 'application/json')
    if (request.url === '/v4/sessions.start') {
      response.end(JSON.stringify({ sessionId: `s${++sessions}` }))
      return
    }
    const session = /^\/v4\/sessions\/([^/]+)\//.exec(request.url)?.[1]
    if (session !== undefined && staleOnce.delete(session)) {
      response.statusCode = 404
      response.end(JSON.stringify({ error: { code: 'SESSION_NOT_FOUND' } }))
      return
    }
    response.end(JSON.stringify({ output: 'done', meta: {} }))
  })
  return { upstream, staleOnce }
}
