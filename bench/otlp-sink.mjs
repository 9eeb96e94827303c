/* global process, console */
// A collector that discards: an OTLP/HTTP endpoint that reads each export and answers it as a
// collector that took it would (200, an empty ExportTraceServiceResponse), so that the traced
// rows measure what the gateway pays for its spans, not a collector. Prints
// `otlp sink listening on <url>` once ready; `GET /stats` answers what it took so far (the runner
// checks that a traced row's spans arrived); `--report` adds the spans' byte count at exit.
import { createServer } from 'node:http'

let exports = 0
let bytes = 0
const server = createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/stats') {
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify({ exports, bytes }))
    return
  }
  request.on('data', (chunk) => {
    bytes += chunk.length
  })
  request.on('end', () => {
    exports++
    const json = request.headers['content-type']?.startsWith('application/json') === true
    response.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf', 'content-length': json ? 2 : 0 })
    response.end(json ? '{}' : undefined)
  })
})
server.keepAliveTimeout = 30_000
server.listen(0, '127.0.0.1', () => {
  console.log(`otlp sink listening on http://127.0.0.1:${server.address().port}/v1/traces`)
})
process.once('SIGTERM', () => {
  console.log(`otlp sink: ${exports} exports, ${bytes} bytes`)
  server.close()
  server.closeAllConnections()
  process.exit(0)
})
