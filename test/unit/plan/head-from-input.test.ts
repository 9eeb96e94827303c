import type { IncomingHttpHeaders } from 'node:http'
import { describe, expect, it } from 'vitest'
import { headersFromRaw } from '../../../src/plan/head-from-input.js'
import { useHttpServer } from '../../helpers/http-server.js'
import { buildRawRequest, rawExchange } from '../../helpers/raw-http.js'

/**
 * Contract: explain builds `IncomingMessage#headers` from header lines the way Node's own parser
 * does, so that it plans from the same joined view the live listener reads.
 */
const seen: { rawHeaders: string[]; headers: IncomingHttpHeaders }[] = []
const server = useHttpServer((request, response) => {
  seen.push({ rawHeaders: request.rawHeaders, headers: request.headers })
  response.end()
})

const CASES: [string, [string, string][]][] = [
  ['single fields, names in any case', [['Host', 'a.example'], ['X-Api-Key', 'k'], ['Content-Type', 'application/json']]],
  ['repeated fields joined with a comma', [['host', 'a'], ['x-session-token', 'one'], ['X-Session-Token', 'two'], ['accept', 'a/b'], ['accept', 'c/d']]],
  ['first-only fields keep their first copy', [['host', 'a'], ['authorization', 'Bearer 1'], ['Authorization', 'Bearer 2'], ['user-agent', 'u1'], ['user-agent', 'u2'], ['content-type', 'a/b'], ['content-type', 'c/d'], ['referer', 'r1'], ['referer', 'r2']]],
  ['cookies joined with a semicolon, set-cookie kept as a list', [['host', 'a'], ['cookie', 'a=1'], ['cookie', 'b=2'], ['set-cookie', 's=1'], ['set-cookie', 's=2']]],
  ['the tenancy and forwarding headers', [['host', 'a'], ['x-tenant-id', 'acme'], ['x-tenant-id', 'acme'], ['x-forwarded-for', '10.0.0.1'], ['X-Forwarded-For', '10.0.0.2']]],
  ['names an object has by inheritance, and __proto__', [['host', 'a'], ['constructor', 'c1'], ['Constructor', 'c2'], ['toString', 't'], ['__proto__', 'p'], ['hasOwnProperty', 'h']]],
  ['proxy-authorization and the other first-only fields', [['host', 'a'], ['proxy-authorization', 'p1'], ['proxy-authorization', 'p2'], ['from', 'f1'], ['from', 'f2'], ['max-forwards', '1'], ['max-forwards', '2'], ['if-modified-since', 'x'], ['if-modified-since', 'y']]]
]

describe('headersFromRaw', () => {
  it.each(CASES)('builds the headers Node builds: %s', async (_name, lines) => {
    seen.length = 0
    await rawExchange(server.url, buildRawRequest('GET / HTTP/1.1', [...lines, ['connection', 'close']]), { timeoutMs: 2_000 })
    const node = seen[0]
    expect(node).toBeDefined()
    const built = headersFromRaw(node!.rawHeaders)
    // toEqual skips a prototype's difference and an own `__proto__`: compared as entries, prototype too.
    expect(Object.entries(built)).toEqual(Object.entries(node!.headers))
    expect(Object.getPrototypeOf(built)).toBe(Object.getPrototypeOf(node!.headers))
  })
})
