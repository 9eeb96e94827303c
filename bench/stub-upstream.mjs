/* global process, console, Buffer */
// The upstream every candidate talks to: a minimal node:http V4 stub that answers the V4 wire
// shapes (SPEC 11) with pre-serialised bodies, so that its own cost is small and the same for
// every row. Prints `stub listening on <url>` once ready.
import { createServer } from 'node:http'

const META = { requestId: 'req_stub', timingMs: { total: 0.1 } }
const EXECUTION = serialise({ output: { text: 'done', tokens: 42 }, effective: { policy: 'default', route: 'default', risk: 'low' }, meta: META })
const UNAUTHORIZED = serialise({ error: { code: 'AUTH_INVALID', message: 'missing session token' }, meta: META })
const NOT_FOUND = serialise({ error: { code: 'NOT_FOUND', message: 'no such route' }, meta: META })
const SESSION_PREFIX = '{"sessionId":"ses_'
const SESSION_SUFFIX = `","defaults":{},"meta":${JSON.stringify(META)}}`

function serialise(value) {
  return Buffer.from(JSON.stringify(value))
}

function headersFor(body) {
  return { 'content-type': 'application/json', 'content-length': body.length }
}

let sessions = 0

function answer(request, response) {
  const url = request.url
  if (request.method !== 'POST') return response.writeHead(404, headersFor(NOT_FOUND)).end(NOT_FOUND)
  // Runtime calls need a bearer session token (contract part 5); this makes the first-answer
  // check prove that the gateway forwarded the credential.
  const authorization = request.headers.authorization
  if (authorization === undefined || !authorization.startsWith('Bearer ')) return response.writeHead(401, headersFor(UNAUTHORIZED)).end(UNAUTHORIZED)
  if (url === '/v4/execute' || (url.startsWith('/v4/sessions/') && url.endsWith('/executions.execute'))) {
    return response.writeHead(200, headersFor(EXECUTION)).end(EXECUTION)
  }
  if (url === '/v4/sessions.start') {
    // A new id per start: session-miss rows map each state key to its own session.
    const body = Buffer.from(SESSION_PREFIX + (++sessions).toString(16).padStart(32, '0') + SESSION_SUFFIX)
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
