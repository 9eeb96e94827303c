/* global process, console, Buffer */
// The upstream every candidate talks to: a minimal node:http V4 stub that answers the V4 wire
// shapes (SPEC 11) with pre-serialised bodies, so that its own cost is small and the same for
// every row. Prints `stub listening on <url>` once ready.
import { createServer } from 'node:http'

// The answers have the simulator's shapes (src/simulator/runtime-routes.ts): executions carry
// `meta.executionId` and `meta.lineageId`, and everything said in a session its `meta.sessionId`
// (contract part 2: "when available"), so the gateway fills in only what a V4 backend leaves out.
const TIMING = { total: 0.1 }
const OUTPUT = { output: { text: 'done', tokens: 42 }, effective: { policy: 'default', route: 'default', risk: 'low' } }
const EXECUTION = serialise({ ...OUTPUT, meta: { requestId: 'req_stub', executionId: 'exe_stub', lineageId: 'lin_stub', timingMs: TIMING } })
const UNAUTHORIZED = serialise({ error: { code: 'AUTH_INVALID', message: 'missing session token' }, meta: { requestId: 'req_stub', timingMs: TIMING } })
const NOT_FOUND = serialise({ error: { code: 'NOT_FOUND', message: 'no such route' }, meta: { requestId: 'req_stub', timingMs: TIMING } })
const SESSION_PATH_PREFIX = '/v4/sessions/'
const SESSION_PATH_SUFFIX = '/executions.execute'

function serialise(value) {
  return Buffer.from(JSON.stringify(value))
}

function headersFor(body) {
  return { 'content-type': 'application/json', 'content-length': body.length }
}

let sessions = 0

function sessionStarted(sessionId) {
  return Buffer.from(JSON.stringify({ sessionId, defaults: {}, meta: { requestId: 'req_stub', sessionId, timingMs: TIMING } }))
}

// One session's execution answer, kept: session-hit rows ask for the same session every time.
let lastSessionId = ''
let lastSessionExecution = EXECUTION
function sessionExecution(sessionId) {
  if (sessionId !== lastSessionId) {
    lastSessionId = sessionId
    lastSessionExecution = serialise({ ...OUTPUT, meta: { requestId: 'req_stub', sessionId, executionId: 'exe_stub', lineageId: 'lin_stub', timingMs: TIMING } })
  }
  return lastSessionExecution
}

function answer(request, response) {
  const url = request.url
  if (request.method !== 'POST') return response.writeHead(404, headersFor(NOT_FOUND)).end(NOT_FOUND)
  // Runtime calls need a bearer session token (contract part 5); this makes the first-answer
  // check prove that the gateway forwarded the credential.
  const authorization = request.headers.authorization
  if (authorization === undefined || !authorization.startsWith('Bearer ')) return response.writeHead(401, headersFor(UNAUTHORIZED)).end(UNAUTHORIZED)
  // The legacy backend's answer to a legacy run (SPEC 14 stage legacy) is the execution's.
  if (url === '/v4/execute' || url === '/v1/headless/runs') return response.writeHead(200, headersFor(EXECUTION)).end(EXECUTION)
  if (url.startsWith(SESSION_PATH_PREFIX) && url.endsWith(SESSION_PATH_SUFFIX)) {
    const body = sessionExecution(decodeURIComponent(url.slice(SESSION_PATH_PREFIX.length, -SESSION_PATH_SUFFIX.length)))
    return response.writeHead(200, headersFor(body)).end(body)
  }
  if (url === '/v4/sessions.start') {
    // A new id per start: session-miss rows map each state key to its own session.
    const body = sessionStarted(`ses_${(++sessions).toString(16).padStart(32, '0')}`)
    return response.writeHead(201, headersFor(body)).end(body)
  }
  return response.writeHead(404, headersFor(NOT_FOUND)).end(NOT_FOUND)
}

const server = createServer(function handleStubRequest(request, response) {
  // Read the body to its end before answering, as a real backend would.
  request.on('end', () => answer(request, response))
  request.resume()
})
// Longer than any warm-up-to-measurement gap, so kept-alive connections are not cut mid-run.
server.keepAliveTimeout = 60_000

server.listen(0, '127.0.0.1', () => {
  const { port } = server.address()
  console.log(`stub listening on http://127.0.0.1:${port}`)
})
process.once('SIGTERM', () => server.close(() => process.exit(0)))
