/* global process, console */
// The reference row: what a user would pick instead of the gateway. A minimal fastify 5 app with
// @fastify/http-proxy and its documented defaults (only `upstream` set), logger off.
// Usage: node bench/http-proxy-reference.mjs <upstream-url>
import proxy from '@fastify/http-proxy'
import Fastify from 'fastify'

const upstream = process.argv[2]
if (upstream === undefined) throw new Error('usage: http-proxy-reference.mjs <upstream-url>')

const app = Fastify({ logger: false })
await app.register(proxy, { upstream })
const url = await app.listen({ host: '127.0.0.1', port: 0 })
console.log(`reference proxy listening on ${url}`)
process.once('SIGTERM', () => app.close().then(() => process.exit(0)))
