/* global process, console, URL */
// A scale row, not a candidate a user would pick: the smallest correct node:http + undici proxy
// (the goals' scale puts it at "about 1.9x the plain plugin", docs/performance.md). It shows what this machine and load allow
// a proxy hop to cost, so the gateway's rows can be read against a ceiling as well as the reference.
// Usage: node bench/handwritten-proxy.mjs <upstream-url>
import { createServer } from 'node:http'
import { Agent } from 'undici'

const upstream = process.argv[2]
if (upstream === undefined) throw new Error('usage: handwritten-proxy.mjs <upstream-url>')
const origin = new URL(upstream).origin
const agent = new Agent({ keepAliveTimeout: 4_000 })
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'host'])

const server = createServer(function proxy(request, response) {
  const headers = {}
  for (const name in request.headers) if (!HOP_BY_HOP.has(name)) headers[name] = request.headers[name]
  agent.dispatch(
    { origin, method: request.method, path: request.url, headers, body: request.method === 'GET' || request.method === 'HEAD' ? null : request },
    {
      onRequestStart() {},
      onResponseStart(_controller, statusCode, answerHeaders) {
        const out = {}
        for (const name in answerHeaders) if (!HOP_BY_HOP.has(name)) out[name] = answerHeaders[name]
        response.writeHead(statusCode, out)
      },
      onResponseData(controller, chunk) {
        if (!response.write(chunk)) {
          controller.pause()
          response.once('drain', () => controller.resume())
        }
      },
      onResponseEnd() {
        response.end()
      },
      onResponseError(_controller, error) {
        if (response.headersSent) response.destroy(error)
        else response.writeHead(502).end()
      }
    }
  )
})
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => console.log(`handwritten proxy listening on http://127.0.0.1:${server.address().port}`))
process.once('SIGTERM', () => server.close(() => process.exit(0)))
