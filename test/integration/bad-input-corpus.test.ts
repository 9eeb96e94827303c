import type { ServerResponse } from 'node:http'
import { beforeAll, describe, expect, it } from 'vitest'
import { ERROR_STATUS, type ErrorCode } from '../../src/errors/registry.js'
import { send } from '../helpers/http.js'
import { buildRawRequest, rawExchange, type RawHeader, type RawOptions, type RawResponse, type RawResult } from '../helpers/raw-http.js'
import { useRecordingUpstream, type RecordedRequest } from '../helpers/recording-upstream.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'

/*
 * Bad input never loses a request or leaks a secret. A corpus of malformed and hostile
 * requests, written as raw bytes on fresh sockets, against one gateway whose tenant upstream
 * records what reached it. Every case says precisely what must happen: the gateway's own SPEC 6
 * error and nothing forwarded; a parser-level refusal that also closes the connection (RFC 9112
 * 11.2); or, for the few requests that are legitimate native passthrough or valid legacy calls,
 * exactly one request to the tenant's upstream and never to anything a request names.
 */

const BODY_LIMIT = 4096
const EXECUTE = '/v1/headless/runs'
const SESSION_BODY = '/v1/runs/invoke'
const SESSION_PARAM = '/v1/runs/run-7/invoke'
const LEGACY_ROUTES = [EXECUTE, SESSION_BODY, SESSION_PARAM] as const
const SESSION_ROUTES = [SESSION_BODY, SESSION_PARAM] as const
// Replaced at run time, once the servers listen (the corpus is built when the file loads).
const DECOY_PORT = '__DECOY_PORT__'
const UPSTREAM_PORT = '__UPSTREAM_PORT__'
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

type Expectation =
  /** The gateway's SPEC 6 error on a kept or closed connection; nothing forwarded. */
  | { kind: 'refused'; status: number; code: ErrorCode; requestId?: string | 'fresh' }
  /** Refused by the HTTP parser: SPEC 6 error, `connection: close`, then the gateway closes; nothing forwarded. */
  | { kind: 'parser'; status: number; code: ErrorCode }
  /** Legitimate traffic: exactly one request, to the tenant's upstream, with this method and URL. */
  | { kind: 'forwarded'; method: string; url: string; check?: (recorded: RecordedRequest) => void }
  /** A JSON number that no double holds: refused with 400, or forwarded with its digits intact, never altered. */
  | { kind: 'refused-or-verbatim'; literal: string }
  /** A body that stops arriving: no answer while the client waits, and no complete request upstream. */
  | { kind: 'stalled' }

interface CorpusCase {
  name: string
  bytes: Buffer
  expect: Expectation
  /** Secrets planted in this case: never in the answer, never in the log. */
  secrets: string[]
  options?: RawOptions
}

const corpus: CorpusCase[] = []
const allSecrets: string[] = []
let secretCount = 0

/** A credential-shaped value unique to one case, so the log check can name the case it came from. */
function secret(prefix = ''): string {
  const value = `${prefix}s3cr3t${String(++secretCount).padStart(4, '0')}x`
  allSecrets.push(value)
  return value
}

function add(name: string, bytes: Buffer, expectation: Expectation, secrets: string[] = [], options?: RawOptions): void {
  corpus.push({ name, bytes, expect: expectation, secrets, options })
}

const refused = (status: number, code: ErrorCode): Expectation => ({ kind: 'refused', status, code })
const parser = (status: number, code: ErrorCode): Expectation => ({ kind: 'parser', status, code })
const INVALID = refused(400, 'INVALID_REQUEST')
const FORBIDDEN = refused(403, 'FORBIDDEN')
const NOT_FOUND = refused(404, 'ROUTE_NOT_FOUND')
const PARSER_400 = parser(400, 'INVALID_REQUEST')
const PARSER_431 = parser(431, 'REQUEST_HEADERS_TOO_LARGE')

/** A well-formed request: Host first, `Connection: close` (so the exchange ends), Content-Length when there is a body. */
function request(method: string, target: string, headers: readonly RawHeader[] = [], body: string | Buffer = ''): Buffer {
  const all: RawHeader[] = [['Host', 'gateway.test'], ...headers, ['Connection', 'close']]
  if (body.length > 0 || method === 'POST') all.push(['Content-Length', String(Buffer.byteLength(body))])
  return buildRawRequest(`${method} ${target} HTTP/1.1`, all, body)
}

interface LegacyOptions {
  contentType?: string | null
  credential?: readonly RawHeader[]
  extra?: readonly RawHeader[]
  query?: string
}

/** A legacy POST with a valid session token and `application/json` unless told otherwise. */
function legacyCall(path: string, body: string | Buffer, options: LegacyOptions = {}): { bytes: Buffer; secrets: string[] } {
  const secrets: string[] = []
  let credential = options.credential
  if (credential === undefined) {
    const token = secret()
    secrets.push(token)
    credential = [['Authorization', `Bearer ${token}`]]
  }
  const contentType = options.contentType === undefined ? 'application/json' : options.contentType
  const headers: RawHeader[] = [...credential, ...(contentType === null ? [] : [['Content-Type', contentType] as const]), ...(options.extra ?? [])]
  return { bytes: request('POST', `${path}${options.query ?? ''}`, headers, body), secrets }
}

function addLegacy(name: string, path: string, body: string | Buffer, expectation: Expectation, options: LegacyOptions = {}, extraSecrets: string[] = []): void {
  const { bytes, secrets } = legacyCall(path, body, options)
  add(`${name} on POST ${path}`, bytes, expectation, [...secrets, ...extraSecrets])
}

const executeForward = (check?: (recorded: RecordedRequest) => void): Expectation => ({ kind: 'forwarded', method: 'POST', url: '/v4/execute', check })
const upstreamJson = (recorded: RecordedRequest): Record<string, unknown> => JSON.parse(recorded.body.toString('utf8')) as Record<string, unknown>

// ---------------------------------------------------------------------------------------------
// Legacy bodies (SPEC 4: JSON objects; not JSON or not an object: 400; over limits.bodyBytes: 413)
// ---------------------------------------------------------------------------------------------

const INVALID_JSON: ReadonlyArray<readonly [string, string | Buffer]> = [
  ['a truncated JSON body', '{"input":1'],
  ['trailing garbage after the JSON', '{"input":1}garbage'],
  ['two JSON documents', '{"input":1}{"input":2}'],
  ['NaN', '{"input":NaN}'],
  ['an Infinity literal', '{"input":Infinity}'],
  ['single quotes', "{'input':1}"],
  ['an unquoted key', '{input:1}'],
  ['a trailing comma', '{"input":1,}'],
  ['a comment', '{"input":1 /* c */}'],
  ['a hexadecimal number', '{"input":0x10}'],
  ['a leading zero', '{"input":01}'],
  ['a raw control character in a string', '{"input":"a\u0001b"}'],
  ['a bad escape', '{"input":"\\x41"}'],
  ['a byte-order mark', '\uFEFF{"input":1}'],
  ['an empty body', ''],
  ['only whitespace', ' \r\n\t '],
  ['null', 'null'],
  ['an array', '[{"input":1}]'],
  ['an empty array', '[]'],
  ['a string', '"input"'],
  ['a number', '42'],
  ['true', 'true'],
  ['an object without input', '{}'],
  ['input only under __proto__', '{"__proto__":{"input":1}}'],
  ['input only under constructor', '{"constructor":{"input":1}}'],
  ['4,000 unclosed brackets', '['.repeat(4_000)],
  ['invalid UTF-8', Buffer.concat([Buffer.from('{"input":"'), Buffer.from([0xff, 0xfe, 0xc0, 0xaf]), Buffer.from('"}')])],
  ['UTF-16 text', Buffer.from('{"input":1}', 'utf16le')]
]
for (const path of LEGACY_ROUTES) {
  for (const [name, body] of INVALID_JSON) addLegacy(`answers 400 INVALID_REQUEST to ${name}`, path, body, INVALID)
  addLegacy('answers 400 INVALID_REQUEST to a number as policy', path, '{"input":1,"policy":5}', INVALID)
  addLegacy('answers 400 INVALID_REQUEST to an array as route', path, '{"input":1,"route":[]}', INVALID)
  addLegacy('answers 400 INVALID_REQUEST to an object as risk', path, '{"input":1,"risk":{}}', INVALID)
  addLegacy('answers 400 INVALID_REQUEST when a duplicate policy key ends as a number', path, '{"input":1,"policy":"strict","policy":5}', INVALID)
  addLegacy('answers 413 PAYLOAD_TOO_LARGE to 100,000 opening brackets', path, '['.repeat(100_000), refused(413, 'PAYLOAD_TOO_LARGE'))
  addLegacy('answers 413 PAYLOAD_TOO_LARGE to a string one byte over limits.bodyBytes', path, `{"input":"${'a'.repeat(BODY_LIMIT - 11)}"}`, refused(413, 'PAYLOAD_TOO_LARGE'))
  for (const [name, literal] of [['1e999999', '1e999999'], ['-1e999999', '-1e999999'], ['a 400-digit integer', '9'.repeat(400)], ['a negative 400-digit integer', `-${'1'.repeat(400)}`], ['18 digits around a decimal point', '123456789.123456789']] as const) {
    addLegacy(`answers 400 INVALID_REQUEST or forwards the digits unchanged, never null, for ${name} in input`, path, `{"input":{"n":${literal}}}`, { kind: 'refused-or-verbatim', literal })
  }
}
// A chunked body carries no declared length: the limit is enforced while reading.
for (const path of LEGACY_ROUTES) {
  const token = secret()
  const body = `{"input":"${'b'.repeat(BODY_LIMIT)}"}`
  add(
    `answers 413 PAYLOAD_TOO_LARGE to a chunked body that runs over limits.bodyBytes on POST ${path}`,
    buildRawRequest(`POST ${path} HTTP/1.1`, [['Host', 'gateway.test'], ['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json'], ['Transfer-Encoding', 'chunked'], ['Connection', 'close']],
      `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`),
    refused(413, 'PAYLOAD_TOO_LARGE'),
    [token]
  )
}
for (const path of SESSION_ROUTES) {
  addLegacy('answers 400 INVALID_REQUEST to a string as state', path, '{"input":1,"state":"strict"}', INVALID)
  addLegacy('answers 400 INVALID_REQUEST to an unknown key in state', path, '{"input":1,"state":{"tier":"gold"}}', INVALID)
  addLegacy('answers 400 INVALID_REQUEST to a __proto__ key in state', path, '{"input":1,"state":{"__proto__":{"policy":"p"}}}', INVALID)
  addLegacy('answers 400 INVALID_REQUEST to a number as a state field', path, '{"input":1,"state":{"policy":1}}', INVALID)
  addLegacy('answers 400 INVALID_REQUEST to an empty stateId', path, '{"input":1,"stateId":""}', INVALID)
  addLegacy('answers 400 INVALID_REQUEST to a stateId of 257 chars', path, `{"input":1,"stateId":"${'s'.repeat(257)}"}`, INVALID)
  addLegacy('answers 400 INVALID_REQUEST to a number as stateId', path, '{"input":1,"stateId":5}', INVALID)
}
// Hostile but valid: forwarded once, re-serialised, with one reading of the body.
addLegacy('forwards a body of exactly limits.bodyBytes', EXECUTE, `{"input":"${'c'.repeat(BODY_LIMIT - 12)}"}`,
  executeForward((recorded) => expect((upstreamJson(recorded).input as string).length).toBe(BODY_LIMIT - 12)))
addLegacy('forwards the last of duplicate policy keys, and only that one', EXECUTE, '{"input":1,"policy":"strict","policy":"none"}',
  executeForward((recorded) => {
    expect(upstreamJson(recorded)).toEqual({ input: 1, policy: 'none' })
    expect(recorded.body.toString('utf8').match(/"policy"/g)).toHaveLength(1)
  }))
addLegacy('forwards the last of duplicate input keys', EXECUTE, '{"input":1,"input":{"x":2}}', executeForward((recorded) => expect(upstreamJson(recorded)).toEqual({ input: { x: 2 } })))
addLegacy('forwards a __proto__ member as plain data without polluting any prototype', EXECUTE, '{"input":1,"__proto__":{"policy":"polluted","isAdmin":true}}',
  executeForward((recorded) => {
    const body = upstreamJson(recorded)
    expect(Object.hasOwn(body, '__proto__')).toBe(true)
    expect(body.policy).toBeUndefined()
  }))
addLegacy('forwards a constructor.prototype member as plain data', EXECUTE, '{"input":{"constructor":{"prototype":{"isAdmin":true}}},"constructor":{"prototype":{"isAdmin":true}}}',
  executeForward((recorded) => expect(upstreamJson(recorded).constructor).toEqual({ prototype: { isAdmin: true } })))
addLegacy('forwards input nested 2,000 levels deep', EXECUTE, `{"input":${'['.repeat(2_000)}${']'.repeat(2_000)}}`,
  executeForward((recorded) => expect(recorded.body.toString('utf8')).toContain('['.repeat(2_000))))
addLegacy('forwards a lone surrogate escape as an escape', EXECUTE, '{"input":"\\ud800"}', executeForward((recorded) => expect(recorded.body.toString('utf8')).toContain('\\ud800')))
addLegacy('forwards null as input', EXECUTE, '{"input":null}', executeForward((recorded) => expect(upstreamJson(recorded)).toEqual({ input: null })))

// ---------------------------------------------------------------------------------------------
// Content types (SPEC 4: application/json with any parameters; anything else 415)
// ---------------------------------------------------------------------------------------------

const REFUSED_TYPES: ReadonlyArray<string | null> = [
  'text/plain', 'text/json', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', 'application/jsonx',
  'application/json-seq', 'application/xml', 'application/javascript', 'json', 'application/', '*/*', '', 'application/json, text/plain',
  'application/vnd.api+json', 'application/problem+json', null
]
for (const path of [EXECUTE, SESSION_PARAM]) {
  for (const type of REFUSED_TYPES) {
    addLegacy(`answers 415 UNSUPPORTED_MEDIA_TYPE to content-type ${type === null ? '(missing)' : JSON.stringify(type)}`, path, '{"input":1}', refused(415, 'UNSUPPORTED_MEDIA_TYPE'), { contentType: type })
  }
}
addLegacy('answers 415 UNSUPPORTED_MEDIA_TYPE to a multipart body holding JSON', EXECUTE, '--x\r\nContent-Type: application/json\r\n\r\n{"input":1}\r\n--x--\r\n',
  refused(415, 'UNSUPPORTED_MEDIA_TYPE'), { contentType: 'multipart/mixed; boundary=x' })
addLegacy('answers 415 UNSUPPORTED_MEDIA_TYPE when the first of two content-types is text/plain', EXECUTE, '{"input":1}', refused(415, 'UNSUPPORTED_MEDIA_TYPE'),
  { contentType: 'text/plain', extra: [['Content-Type', 'application/json']] })
const ACCEPTED_TYPES = [
  'application/json; charset=utf-8', 'application/json;charset=UTF-8', 'APPLICATION/JSON', 'Application/Json; Charset="utf-8"', 'application/json;',
  'application/json ;', 'application/json; odd=param; another'
]
for (const type of ACCEPTED_TYPES) {
  addLegacy(`forwards as application/json a body sent with content-type ${JSON.stringify(type)}`, EXECUTE, '{"input":"ct"}',
    executeForward((recorded) => {
      expect(recorded.headers['content-type']).toBe('application/json')
      expect(upstreamJson(recorded)).toEqual({ input: 'ct' })
    }), { contentType: type })
}

// ---------------------------------------------------------------------------------------------
// Request targets (SPEC 2: never an open proxy; only origin-form is served)
// ---------------------------------------------------------------------------------------------

const userinfoSecret = secret()
const TARGETS: ReadonlyArray<readonly [string, string, string]> = [
  ['an absolute-form target naming another server', 'GET', `http://127.0.0.1:${DECOY_PORT}/v4/x`],
  ['an absolute-form legacy target naming another server', 'POST', `http://127.0.0.1:${DECOY_PORT}${EXECUTE}`],
  ['an absolute-form target naming the tenant upstream itself', 'GET', `http://127.0.0.1:${UPSTREAM_PORT}/v4/x`],
  ['an https absolute-form target', 'GET', 'https://evil.example/v4/x'],
  ['an absolute-form target with userinfo', 'GET', `http://user:${userinfoSecret}@127.0.0.1:${DECOY_PORT}/v4/x`],
  ['an absolute-form target toward a blocked path', 'GET', `http://127.0.0.1:${DECOY_PORT}/internal/x`],
  ['an authority-form target on GET', 'GET', `127.0.0.1:${DECOY_PORT}`],
  ['an asterisk-form target on OPTIONS', 'OPTIONS', '*'],
  ['an asterisk-form target on GET', 'GET', '*'],
  ['a target without a leading slash', 'GET', 'v4/x'],
  ['a target that is only a backslash path', 'GET', '\\internal'],
  ['a target that is only a query', 'GET', '?token=x']
]
for (const [name, method, target] of TARGETS) {
  const token = secret()
  add(`answers 400 INVALID_REQUEST to ${name}`, request(method, target, [['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json']], method === 'POST' ? '{"input":1}' : ''),
    INVALID, [token, ...(target.includes(userinfoSecret) ? [userinfoSecret] : [])])
}
add('answers 404 ROUTE_NOT_FOUND to a network-path target (//host/...) and never reaches that host', request('GET', `//127.0.0.1:${DECOY_PORT}/v4/x`), NOT_FOUND)
for (const target of [`127.0.0.1:${DECOY_PORT}`, 'evil.example:443', `127.0.0.1:${UPSTREAM_PORT}`]) {
  const token = secret()
  add(`answers 400 INVALID_REQUEST to CONNECT ${target} and closes the connection`,
    buildRawRequest(`CONNECT ${target} HTTP/1.1`, [['Host', target], ['Proxy-Authorization', `Basic ${token}`]]), PARSER_400, [token])
}

// ---------------------------------------------------------------------------------------------
// Host tricks (SPEC 2: a Host header never selects where a request goes)
// ---------------------------------------------------------------------------------------------

const hostSecret = secret()
const nativeTo = (url: string, check?: (recorded: RecordedRequest) => void): Expectation => ({ kind: 'forwarded', method: 'GET', url, check })
const HOSTS: ReadonlyArray<readonly [string, readonly RawHeader[]]> = [
  ['a Host naming another server', [['Host', `127.0.0.1:${DECOY_PORT}`]]],
  ['a Host naming the tenant upstream', [['Host', `127.0.0.1:${UPSTREAM_PORT}`]]],
  ['an empty Host', [['Host', '']]],
  ['a Host with an out-of-range port', [['Host', 'gateway.test:99999']]],
  ['an IPv6 Host naming loopback', [['Host', `[::1]:${DECOY_PORT}`]]],
  ['a Host with a trailing dot', [['Host', 'gateway.test.']]],
  ['x-forwarded-host and Forwarded naming another server', [['Host', 'gateway.test'], ['X-Forwarded-Host', `127.0.0.1:${DECOY_PORT}`], ['Forwarded', `host=127.0.0.1:${DECOY_PORT}`]]]
]
for (const [name, hostHeaders] of HOSTS) {
  add(`forwards only to the tenant upstream a native request with ${name}`,
    buildRawRequest('GET /v4/host-check HTTP/1.1', [...hostHeaders, ['Connection', 'close']]), nativeTo('/v4/host-check'))
  const token = secret()
  add(`forwards only to the tenant upstream a legacy call with ${name}`,
    buildRawRequest(`POST ${EXECUTE} HTTP/1.1`, [...hostHeaders, ['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json'], ['Content-Length', '11'], ['Connection', 'close']], '{"input":1}'),
    executeForward(), [token])
}
// RFC 9110 7.2: Host is uri-host [ ":" port ], without userinfo: a 400 that closes, as every refused head does (docs/decisions.md).
for (const [name, host] of [['userinfo', `user:${hostSecret}@127.0.0.1:${DECOY_PORT}`], ['a second port', `127.0.0.1:${DECOY_PORT}:80`], ['a port that is not digits', 'gateway.test:1.2']] as const) {
  add(`answers 400 INVALID_REQUEST and closes on a native request with a Host with ${name}`,
    buildRawRequest('GET /v4/host-check HTTP/1.1', [['Host', host]]), PARSER_400, name === 'userinfo' ? [hostSecret] : [])
  const token = secret()
  add(`answers 400 INVALID_REQUEST and closes on a legacy call with a Host with ${name}`,
    buildRawRequest(`POST ${EXECUTE} HTTP/1.1`, [['Host', host], ['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json'], ['Content-Length', '11']], '{"input":1}'),
    PARSER_400, [token, ...(name === 'userinfo' ? [hostSecret] : [])])
}
// RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request without Host; SPEC 6: in the envelope.
add('answers 400 INVALID_REQUEST in the envelope to an HTTP/1.1 native request without Host', buildRawRequest('GET /v4/host-check HTTP/1.1', [['Connection', 'close']]), INVALID)
{
  const token = secret()
  add('answers 400 INVALID_REQUEST in the envelope to an HTTP/1.1 legacy call without Host',
    buildRawRequest(`POST ${EXECUTE} HTTP/1.1`, [['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json'], ['Content-Length', '11'], ['Connection', 'close']], '{"input":1}'), INVALID, [token])
}
add('forwards only to the tenant upstream an HTTP/1.0 request without Host', buildRawRequest('GET /v4/host-check HTTP/1.0', []), nativeTo('/v4/host-check'))
// RFC 9112 3.2: more than one Host is a 400 too; Node would silently keep the first.
add('answers 400 INVALID_REQUEST in the envelope to a native request with two Host headers',
  buildRawRequest('GET /v4/host-check HTTP/1.1', [['Host', 'gateway.test'], ['Host', `127.0.0.1:${DECOY_PORT}`], ['Connection', 'close']]), INVALID)
{
  const token = secret()
  add('answers 400 INVALID_REQUEST in the envelope to a legacy call with two Host headers',
    buildRawRequest(`POST ${EXECUTE} HTTP/1.1`, [['Host', 'gateway.test'], ['Host', `127.0.0.1:${DECOY_PORT}`], ['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json'], ['Content-Length', '11'], ['Connection', 'close']], '{"input":1}'), INVALID, [token])
}

// ---------------------------------------------------------------------------------------------
// Credentials on runtime routes (SPEC 5: conflict first, then malformed, then classification)
// ---------------------------------------------------------------------------------------------

interface CredentialCase {
  name: string
  headers: (a: string, b: string) => RawHeader[]
  query?: (a: string, b: string) => string
  expect: Expectation
  prefix?: string
}
const CONFLICT = refused(400, 'CREDENTIALS_CONFLICT')
const AUTH_INVALID = refused(401, 'AUTH_INVALID')
const WRONG_TYPE = refused(401, 'INVALID_CREDENTIAL_TYPE')
const CREDENTIAL_CASES: CredentialCase[] = [
  { name: 'two different Authorization headers', headers: (a, b) => [['Authorization', `Bearer ${a}`], ['Authorization', `Bearer ${b}`]], expect: CONFLICT },
  { name: 'Bearer and Token schemes with different values', headers: (a, b) => [['Authorization', `Bearer ${a}`], ['Authorization', `Token ${b}`]], expect: CONFLICT },
  { name: 'Authorization and a different x-api-key', headers: (a, b) => [['Authorization', `Bearer ${a}`], ['X-Api-Key', b]], expect: CONFLICT },
  { name: 'Authorization and a different x-session-token', headers: (a, b) => [['Authorization', `Bearer ${a}`], ['X-Session-Token', b]], expect: CONFLICT },
  { name: 'x-api-key and a different x-service-api-key', headers: (a, b) => [['X-Api-Key', a], ['X-Service-Api-Key', b]], expect: CONFLICT },
  { name: 'x-api-key repeated with different values', headers: (a, b) => [['X-Api-Key', a], ['X-Api-Key', b]], expect: CONFLICT },
  { name: 'x-session-token repeated with different values', headers: (a, b) => [['X-Session-Token', a], ['X-Session-Token', b]], expect: CONFLICT },
  { name: 'a query token and a different Authorization', headers: (a) => [['Authorization', `Bearer ${a}`]], query: (_a, b) => `?token=${b}`, expect: CONFLICT },
  { name: 'the query token twice with different values', headers: () => [], query: (a, b) => `?token=${a}&token=${b}`, expect: CONFLICT },
  { name: 'a session token and a different key_ value', headers: (a, b) => [['Authorization', `Bearer ${a}`], ['X-Service-Api-Key', `key_${b}`]], expect: CONFLICT },
  { name: 'a session token and a different malformed value (conflict is checked first)', headers: (a, b) => [['Authorization', `Bearer ${a}`], ['X-Api-Key', `${b} with spaces`]], expect: CONFLICT },
  { name: 'no credential at all', headers: () => [], expect: AUTH_INVALID },
  { name: 'a Bearer scheme without a token', headers: () => [['Authorization', 'Bearer']], expect: AUTH_INVALID },
  { name: 'Basic credentials', headers: (a) => [['Authorization', `Basic ${Buffer.from(`user:${a}`).toString('base64')}`]], expect: AUTH_INVALID },
  { name: 'a token with a space inside', headers: (a) => [['Authorization', `Bearer ${a} tail`]], expect: AUTH_INVALID },
  { name: 'a token with a tab inside', headers: (a) => [['Authorization', `Bearer ${a}\ttail`]], expect: AUTH_INVALID },
  { name: 'an x-api-key with a tab inside', headers: (a) => [['X-Api-Key', `${a}\ttail`]], expect: AUTH_INVALID },
  { name: 'an x-api-key holding a comma list', headers: (a, b) => [['X-Api-Key', `${a}, ${b}`]], expect: AUTH_INVALID },
  { name: 'an empty Authorization', headers: () => [['Authorization', '']], expect: AUTH_INVALID },
  { name: 'a token with a non-ASCII byte', headers: (a) => [['Authorization', `Bearer ${a}\u00e9`]], expect: AUTH_INVALID },
  { name: 'a token of 4,097 bytes', headers: (a) => [['Authorization', `Bearer ${a}${'t'.repeat(4_097 - a.length)}`]], expect: AUTH_INVALID },
  { name: 'an x-api-key of 4,097 bytes', headers: (a) => [['X-Api-Key', `${a}${'t'.repeat(4_097 - a.length)}`]], expect: AUTH_INVALID },
  { name: 'a query token of 4,097 bytes', headers: () => [], query: (a) => `?token=${a}${'t'.repeat(4_097 - a.length)}`, expect: AUTH_INVALID },
  { name: 'a query token with an encoded space', headers: () => [], query: (a) => `?token=${a}%20tail`, expect: AUTH_INVALID },
  { name: 'a query token with an encoded NUL', headers: () => [], query: (a) => `?token=${a}%00`, expect: AUTH_INVALID },
  { name: 'a query token with encoded CR LF', headers: () => [], query: (a) => `?token=${a}%0d%0aX-Injected:%201`, expect: AUTH_INVALID },
  { name: 'a query token with an encoded DEL', headers: () => [], query: (a) => `?token=${a}%7f`, expect: AUTH_INVALID },
  { name: 'an empty query token', headers: () => [], query: () => '?token=', expect: AUTH_INVALID },
  { name: 'a key_ service key as Bearer', headers: (a) => [['Authorization', `Bearer ${a}`]], prefix: 'key_', expect: AUTH_INVALID },
  { name: 'a key_ service key in x-api-key', headers: (a) => [['X-Api-Key', a]], prefix: 'key_', expect: AUTH_INVALID },
  { name: 'a key_ service key in x-service-api-key', headers: (a) => [['X-Service-Api-Key', a]], prefix: 'key_', expect: AUTH_INVALID },
  { name: 'a key_ service key in x-session-token', headers: (a) => [['X-Session-Token', a]], prefix: 'key_', expect: AUTH_INVALID },
  { name: 'a key_ service key in the query', headers: () => [], query: (a) => `?token=${a}`, prefix: 'key_', expect: AUTH_INVALID },
  { name: 'an sa_ identifier as Bearer', headers: (a) => [['Authorization', `Bearer ${a}`]], prefix: 'sa_', expect: WRONG_TYPE },
  { name: 'an sa_ identifier with the Token scheme', headers: (a) => [['Authorization', `Token ${a}`]], prefix: 'sa_', expect: WRONG_TYPE },
  { name: 'an sa_ identifier in x-api-key', headers: (a) => [['X-Api-Key', a]], prefix: 'sa_', expect: WRONG_TYPE },
  { name: 'an sa_ identifier in x-service-api-key', headers: (a) => [['X-Service-Api-Key', a]], prefix: 'sa_', expect: WRONG_TYPE },
  { name: 'an sa_ identifier in x-session-token', headers: (a) => [['X-Session-Token', a]], prefix: 'sa_', expect: WRONG_TYPE },
  { name: 'an sa_ identifier in the query', headers: () => [], query: (a) => `?token=${a}`, prefix: 'sa_', expect: WRONG_TYPE }
]
for (const path of [EXECUTE, SESSION_BODY]) {
  for (const credentialCase of CREDENTIAL_CASES) {
    const a = secret(credentialCase.prefix)
    const b = secret(credentialCase.prefix)
    const { code, status } = credentialCase.expect as { code: ErrorCode; status: number }
    addLegacy(`answers ${status} ${code} to ${credentialCase.name}`, path, '{"input":1,"stateId":"cred"}', credentialCase.expect,
      { credential: credentialCase.headers(a, b), query: credentialCase.query?.(a, b) }, [a, b])
  }
}
{
  const token = secret()
  addLegacy('forwards as exactly one Bearer a token presented in Authorization and x-api-key alike', EXECUTE, '{"input":1}',
    executeForward((recorded) => {
      expect(recorded.headers.authorization).toBe(`Bearer ${token}`)
      expect(recorded.headers['x-api-key']).toBeUndefined()
    }), { credential: [['Authorization', `Token ${token}`], ['X-Api-Key', token]] }, [token])
}
{
  const token = secret()
  addLegacy('forwards as Bearer a token from the query alone', EXECUTE, '{"input":1}',
    executeForward((recorded) => expect(recorded.headers.authorization).toBe(`Bearer ${token}`)), { credential: [], query: `?token=${token}` }, [token])
}
{
  const token = secret()
  const long = `${token}${'t'.repeat(4_096 - token.length)}`
  addLegacy('forwards a token of exactly 4,096 bytes', EXECUTE, '{"input":1}',
    executeForward((recorded) => expect(recorded.headers.authorization).toBe(`Bearer ${long}`)), { credential: [['Authorization', `Bearer ${long}`]] }, [token])
}
{
  const token = secret()
  addLegacy('forwards as Bearer a lower-case scheme followed by several spaces', EXECUTE, '{"input":1}',
    executeForward((recorded) => expect(recorded.headers.authorization).toBe(`Bearer ${token}`)), { credential: [['Authorization', `bearer   ${token}`]] }, [token])
}
{
  const [a, b] = [secret(), secret('sa_')]
  add('forwards conflicting credentials on native /v4/* unchanged (native traffic is never rewritten)',
    request('GET', '/v4/credentials', [['Authorization', `Bearer ${a}`], ['X-Api-Key', b]]),
    nativeTo('/v4/credentials', (recorded) => {
      expect(recorded.headers.authorization).toBe(`Bearer ${a}`)
      expect(recorded.headers['x-api-key']).toBe(b)
    }), [a, b])
}

// ---------------------------------------------------------------------------------------------
// Header and request-line syntax: refused by Node's parser, answered by the gateway, then closed
// ---------------------------------------------------------------------------------------------

const BAD_HEADER_LINES: ReadonlyArray<readonly [string, string | string[]]> = [
  ['a NUL byte in a header value', 'X-Bad: a\x00b'],
  ['a SOH control character in a header value', 'X-Bad: a\x01b'],
  ['a DEL in a header value', 'X-Bad: a\x7fb'],
  ['a bare CR in a header value', 'X-Bad: a\rb'],
  ['a vertical tab in a header value', 'X-Bad: a\x0bb'],
  ['an ESC in a header value', 'X-Bad: a\x1bb'],
  ['a NUL byte in a header name', 'X-B\x00ad: v'],
  ['a space inside a header name', 'X Bad: v'],
  ['a space before the colon', 'X-Bad : v'],
  ['parentheses in a header name', 'X-(Bad): v'],
  ['an @ in a header name', 'X-B@d: v'],
  ['an empty header name', ': v'],
  ['a non-ASCII byte in a header name', 'X-B\u00e4d: v'],
  ['a header line without a colon', 'X-Bad v'],
  ['an obs-fold continuation line', ['X-Bad: a', ' folded']],
  ['a NUL byte inside the credential', 'X-Api-Key: k\x00ey']
]
for (const [target, method, body] of [['/v4/syntax', 'GET', ''], [EXECUTE, 'POST', '{"input":1}']] as const) {
  for (const [name, lines] of BAD_HEADER_LINES) {
    const token = secret()
    const bad = Array.isArray(lines) ? lines : [lines]
    add(`answers 400 INVALID_REQUEST and closes on ${name} (${method} ${target})`,
      buildRawRequest(`${method} ${target} HTTP/1.1`, [['Host', 'gateway.test'], ['Authorization', `Bearer ${token}`], ...bad, ['Content-Type', 'application/json'], ['Content-Length', String(body.length)]], body),
      PARSER_400, [token])
  }
}
add('answers 400 INVALID_REQUEST and closes on a first header line that starts with whitespace', Buffer.from('GET /v4/x HTTP/1.1\r\n Host: gateway.test\r\n\r\n', 'latin1'), PARSER_400)
add('answers 400 INVALID_REQUEST and closes on bare LF line endings', Buffer.from('GET /v4/x HTTP/1.1\nHost: gateway.test\n\n', 'latin1'), PARSER_400)
const BAD_REQUEST_LINES: ReadonlyArray<readonly [string, string]> = [
  ['HTTP/1.2', 'GET /v4/x HTTP/1.2'],
  ['HTTP/3.0', 'GET /v4/x HTTP/3.0'],
  ['an HTTPS/1.1 protocol name', 'GET /v4/x HTTPS/1.1'],
  ['a lower-case protocol name', 'GET /v4/x http/1.1'],
  ['a space inside the target', 'GET /v4/a b HTTP/1.1'],
  ['a NUL byte inside the target', 'GET /v4/a\x00b HTTP/1.1'],
  ['a tab inside the target', 'GET /v4/a\tb HTTP/1.1'],
  ['a DEL inside the target', 'GET /v4/a\x7fb HTTP/1.1'],
  ['a CR inside the request line', 'GET /v4/a\rb HTTP/1.1'],
  ['text after the version', 'GET /v4/x HTTP/1.1 extra'],
  ['a lower-case method on a legacy route', `post ${EXECUTE} HTTP/1.1`],
  ['a lower-case method on a native route', 'post /v4/x HTTP/1.1'],
  ['a mixed-case method', 'Get /v4/x HTTP/1.1'],
  ['an unknown method', 'FOO /v4/x HTTP/1.1'],
  ['an unknown method on a blocked path', 'FOO /internal/x HTTP/1.1'],
  ['a 1,000-character method', `${'A'.repeat(1_000)} /v4/x HTTP/1.1`]
]
for (const [name, line] of BAD_REQUEST_LINES) {
  const token = secret()
  add(`answers 400 INVALID_REQUEST and closes on ${name}`, buildRawRequest(line, [['Host', 'gateway.test'], ['Authorization', `Bearer ${token}`]]), PARSER_400, [token])
}

// Node's parser accepts these (RFC 9112 2.2 and 3 let a recipient be lenient); they are ordinary
// native requests then, and go to the tenant's upstream only.
const LENIENT_REQUEST_HEADS: ReadonlyArray<readonly [string, string]> = [
  ['an HTTP/2.0 version on an HTTP/1 connection', 'GET /v4/lenient HTTP/2.0\r\nHost: gateway.test\r\nConnection: close\r\n\r\n'],
  ['two spaces after the method', 'GET  /v4/lenient HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n'],
  ['two spaces before the version', 'GET /v4/lenient  HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n'],
  ['an empty line before the request line', '\r\nGET /v4/lenient HTTP/1.1\r\nHost: gateway.test\r\nConnection: close\r\n\r\n'],
  ['a request line without a version (HTTP/0.9 form)', 'GET /v4/lenient\r\n\r\n']
]
for (const [name, head] of LENIENT_REQUEST_HEADS) {
  add(`forwards only to the tenant upstream a request with ${name}`, Buffer.from(head, 'latin1'), { kind: 'forwarded', method: 'GET', url: '/v4/lenient' })
}

// ---------------------------------------------------------------------------------------------
// Framing (RFC 9112 6: Content-Length and Transfer-Encoding), legacy and native alike
// ---------------------------------------------------------------------------------------------

const FRAMING: ReadonlyArray<readonly [string, readonly string[], string]> = [
  ['Content-Length together with Transfer-Encoding', ['Content-Length: 5', 'Transfer-Encoding: chunked'], '0\r\n\r\n'],
  ['Transfer-Encoding together with Content-Length', ['Transfer-Encoding: chunked', 'Content-Length: 5'], '0\r\n\r\n'],
  ['two different Content-Length headers', ['Content-Length: 5', 'Content-Length: 6'], 'hello!'],
  ['two equal Content-Length headers', ['Content-Length: 5', 'Content-Length: 5'], 'hello'],
  ['a Content-Length list', ['Content-Length: 5, 5'], 'hello'],
  ['a negative Content-Length', ['Content-Length: -1'], 'hello'],
  ['a non-numeric Content-Length', ['Content-Length: abc'], 'hello'],
  ['a Content-Length with a plus sign', ['Content-Length: +5'], 'hello'],
  ['a hexadecimal Content-Length', ['Content-Length: 0x5'], 'hello'],
  ['a fractional Content-Length', ['Content-Length: 5.0'], 'hello'],
  ['a Content-Length with an inner space', ['Content-Length: 1 2'], 'hello'],
  ['a Content-Length that overflows', ['Content-Length: 99999999999999999999999'], 'hello'],
  ['an empty Content-Length', ['Content-Length: '], 'hello'],
  ['Transfer-Encoding identity', ['Transfer-Encoding: identity'], 'hello'],
  ['Transfer-Encoding with chunked not last', ['Transfer-Encoding: chunked, identity'], '5\r\nhello\r\n0\r\n\r\n'],
  ['an unknown Transfer-Encoding', ['Transfer-Encoding: xchunked'], '5\r\nhello\r\n0\r\n\r\n'],
  ['a chunk size that is not hexadecimal', ['Transfer-Encoding: chunked'], 'zz\r\nhello\r\n0\r\n\r\n'],
  ['a negative chunk size', ['Transfer-Encoding: chunked'], '-1\r\nhello\r\n0\r\n\r\n'],
  ['a chunk size with a 0x prefix', ['Transfer-Encoding: chunked'], '0x5\r\nhello\r\n0\r\n\r\n'],
  ['a chunk size that overflows', ['Transfer-Encoding: chunked'], 'fffffffffffffffffffff\r\nhello\r\n0\r\n\r\n'],
  ['a chunk longer than its size', ['Transfer-Encoding: chunked'], '3\r\nhello\r\n0\r\n\r\n'],
  ['a chunk without its closing CRLF', ['Transfer-Encoding: chunked'], '5\r\nhelloX0\r\n\r\n'],
  ['a control character in a chunk extension', ['Transfer-Encoding: chunked'], '5;ext=\x01\r\nhello\r\n0\r\n\r\n']
]
for (const target of ['/v4/framing', EXECUTE]) {
  for (const [name, lines, body] of FRAMING) {
    const token = secret()
    add(`answers 400 INVALID_REQUEST and closes on ${name} (POST ${target})`,
      buildRawRequest(`POST ${target} HTTP/1.1`, [['Host', 'gateway.test'], ['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json'], ...lines], body),
      PARSER_400, [token])
  }
  const token = secret()
  const head: RawHeader[] = [['Host', 'gateway.test'], ['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json']]
  add(`answers 400 INVALID_REQUEST and closes when the client ends its side before Content-Length is reached (POST ${target})`,
    buildRawRequest(`POST ${target} HTTP/1.1`, [...head, ['Content-Length', '100']], '{"input":'), PARSER_400, [token], { halfClose: true })
  add(`answers 400 INVALID_REQUEST and closes when the client ends its side before the last chunk (POST ${target})`,
    buildRawRequest(`POST ${target} HTTP/1.1`, [...head, ['Transfer-Encoding', 'chunked']], '9\r\n{"input":\r\n'), PARSER_400, [token], { halfClose: true })
  // Observed: the gateway keeps waiting for the rest (no request timeout is configured), so the
  // client gives up; what matters here is that nothing complete reached the upstream.
  add(`holds a body shorter than its Content-Length without forwarding a complete request (POST ${target})`,
    buildRawRequest(`POST ${target} HTTP/1.1`, [...head, ['Content-Length', '100']], '{"input":'), { kind: 'stalled' }, [token], { timeoutMs: 300 })
  add(`holds a chunked body without its last chunk without forwarding a complete request (POST ${target})`,
    buildRawRequest(`POST ${target} HTTP/1.1`, [...head, ['Transfer-Encoding', 'chunked']], '9\r\n{"input":\r\n'), { kind: 'stalled' }, [token], { timeoutMs: 300 })
}
{
  // Node hands over the chunked framing and leaves the gzip coding, which the upstream could not
  // tell from the body once the hop-by-hop header is gone: refused (RFC 9112 6.1; docs/decisions.md).
  add('refuses a body with Transfer-Encoding gzip, chunked (native)',
    buildRawRequest('POST /v4/framing HTTP/1.1', [['Host', 'gateway.test'], ['Transfer-Encoding', 'gzip, chunked'], ['Connection', 'close']], '5\r\nhello\r\n0\r\n\r\n'),
    refused(400, 'INVALID_REQUEST'))
}

// ---------------------------------------------------------------------------------------------
// Paths toward the blocked prefixes /internal and /v4/internal (SPEC 2: 403, never forwarded)
// ---------------------------------------------------------------------------------------------

const DOT_SEGMENT_PATHS = [
  '/v4/../internal/x', '/v4/%2e%2e/internal', '/v4/%2E%2E/internal', '/v4/.%2e/internal', '/v4/%2e./internal', '/v4/..%2finternal', '/v4/..%2Finternal',
  '/v4/..%5cinternal', '/v4/%5c..%5cinternal', '/v4\\..\\internal', '/v4/x/../../internal/x', '/v4/./internal', '/./internal/x', '/internal/../v4/x',
  '/internal%2f..%2fv4', '/v4/%2e/internal', '/v1/../internal/x', `${EXECUTE}/../../../internal`, '/v1/runs/%2e%2e/invoke', '/v1/runs/..%2f..%2finternal/invoke',
  // Servlet-style stacks drop `;` segment parameters before resolving dot segments: `..;` is `..` there.
  '/v4/..;/internal/x', '/v4/..;x=1/internal', '/v4/.;/internal', '/v4/%2e%2e;/internal', '/v4/..%3b/internal'
]
for (const path of DOT_SEGMENT_PATHS) add(`answers 400 INVALID_REQUEST to the dot-segment path ${path}`, request('GET', path), INVALID)
const BLOCKED_PATHS = [
  '/internal', '/internal/', '/internal/x', '//internal/x', '///internal', '/INTERNAL/x', '/Internal', '/%69nternal/x', '/%49NTERNAL', '/%2finternal',
  '/v4/internal', '/v4//internal/x', '/v4%2finternal/x', '/V4/INTERNAL/keys', '/v4/%69nternal', '/internal;x=1', '/v4/internal;jsessionid=1',
  '/internal.', '/internal./x', '/internal..', '/internal?x=1', '/v4/internal\\x', '/v4/internal%2f', '/internalx',
  // An empty segment with parameters is an empty segment there: `/v4/;x/internal` is `/v4//internal`.
  '/v4/;x/internal/y', '/;/internal', '/v4;x/internal', '/v4/;/;/internal'
]
for (const path of BLOCKED_PATHS) add(`answers 403 FORBIDDEN to the blocked path ${path}`, request('GET', path), FORBIDDEN)
{
  const token = secret()
  add('answers 403 FORBIDDEN to a legacy-looking POST on a blocked path, before reading credentials', request('POST', '/internal/v1/headless/runs', [['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json']], '{"input":1}'), FORBIDDEN, [token])
}
add('answers 403 FORBIDDEN to a blocked path whatever the tenant header says', request('GET', '/internal/x', [['X-Tenant-Id', 'nobody']]), FORBIDDEN)
// RFC 9112 3.2.1: origin-form has no fragment; checked with the target, before the blocked prefixes.
for (const path of ['/internal#frag', '/v4/x#frag', '/v4/x?a=1#frag']) add(`answers 400 INVALID_REQUEST to the target with a fragment ${path}`, request('GET', path), INVALID)
// RFC 3986 2.1 allows any octet, SPEC 7 passes the path on; the checks read it as UTF-8 and as latin1 (docs/decisions.md).
add('forwards the path /v4/%ff, an octet that is not UTF-8, as it came', request('GET', '/v4/%ff'), nativeTo('/v4/%ff'))
for (const path of ['/internal%ff', '/%69ntern%ffal/x', '/v4/%ff%2e%2e/internal']) {
  add(`answers ${path.includes('%2e') ? 400 : 403} to ${path}, whichever way an upstream reads the octet that is not UTF-8`, request('GET', path), path.includes('%2e') ? INVALID : FORBIDDEN)
}
for (const path of ['/internal%00', '/v4/internal%00', '/v4/x%00', '/v4/%c0%ae%c0%ae/internal', '/v4/%zz', '/v4/%']) {
  add(`answers 400 INVALID_REQUEST to the undecodable or NUL-bearing path ${path}`, request('GET', path), INVALID)
}
// Double encoding is decoded once: the still-encoded form goes upstream, where it names no blocked path.
for (const path of ['/v4/%252e%252e/internal', '/v4/%252e%252e/%252e%252e/internal/x', '/v4/%2569nternal']) {
  add(`forwards the double-encoded path ${path} still encoded`, request('GET', path), nativeTo(path, (recorded) => expect(recorded.url).not.toMatch(/^\/(v4\/)?internal/)))
}
for (const [method, path] of [['POST', `${EXECUTE}/`], ['POST', `${EXECUTE};x=1`], ['POST', '/V1/HEADLESS/RUNS'], ['POST', `${EXECUTE}%2f`], ['GET', EXECUTE], ['PUT', EXECUTE], ['DELETE', SESSION_BODY], ['PATCH', SESSION_PARAM], ['OPTIONS', EXECUTE], ['TRACE', EXECUTE], ['GET', '/'], ['GET', '/v4'], ['GET', '/v3/x']] as const) {
  const token = secret()
  add(`answers 404 ROUTE_NOT_FOUND to ${method} ${path}`, request(method, path, [['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json']], method === 'GET' || method === 'OPTIONS' || method === 'TRACE' ? '' : '{"input":1}'), NOT_FOUND, [token])
}

// ---------------------------------------------------------------------------------------------
// Methods, sizes and tenants
// ---------------------------------------------------------------------------------------------

for (const method of ['TRACE', 'PROPFIND', 'PURGE']) {
  add(`forwards ${method} on native /v4/* unchanged (SPEC 7: method unchanged)`, request(method, '/v4/methods'), { kind: 'forwarded', method, url: '/v4/methods' })
}
add('answers 403 FORBIDDEN to TRACE on a blocked path', request('TRACE', '/internal/x'), FORBIDDEN)
add('answers 431 REQUEST_HEADERS_TOO_LARGE and closes on a 20,000-character native target', buildRawRequest(`GET /v4/${'a'.repeat(20_000)} HTTP/1.1`, [['Host', 'gateway.test']]), PARSER_431)
add('answers 431 REQUEST_HEADERS_TOO_LARGE and closes on a 20,000-character legacy query', buildRawRequest(`POST ${EXECUTE}?pad=${'a'.repeat(20_000)} HTTP/1.1`, [['Host', 'gateway.test']]), PARSER_431)
add('answers 431 REQUEST_HEADERS_TOO_LARGE and closes on a 20,000-character blocked target', buildRawRequest(`GET /internal/${'a'.repeat(20_000)} HTTP/1.1`, [['Host', 'gateway.test']]), PARSER_431)
add('forwards an 8,000-character native path (under the header limit)', request('GET', `/v4/${'p'.repeat(8_000)}`), nativeTo(`/v4/${'p'.repeat(8_000)}`))
add('answers 431 REQUEST_HEADERS_TOO_LARGE and closes on 3,000 headers',
  buildRawRequest('GET /v4/x HTTP/1.1', [['Host', 'gateway.test'], ...Array.from({ length: 3_000 }, (_value, index) => [`X-Pad-${index}`, 'v'] as const)]), PARSER_431)
// The listener sets no header count (a dropped header could hide a second credential); the
// upstream here sets none either, as Node 24 answers 431 past its default of 2,000.
add('forwards 2,100 short headers, every one of them',
  request('GET', '/v4/many-headers', Array.from({ length: 2_100 }, (_value, index) => [`h${index}`, 'v'] as const)),
  nativeTo('/v4/many-headers', (recorded) => expect(Object.keys(recorded.headers).filter((name) => /^h\d+$/.test(name)).length).toBe(2_100)))
for (const [name, target, header] of [
  ['a 20 KiB header on native traffic', '/v4/x', 'X-Big'],
  ['a 20 KiB header on a legacy call', EXECUTE, 'X-Big'],
  ['a 20 KiB Authorization header', EXECUTE, 'Authorization']
] as const) {
  const token = secret()
  add(`answers 431 REQUEST_HEADERS_TOO_LARGE and closes on ${name}`,
    buildRawRequest(`POST ${target} HTTP/1.1`, [['Host', 'gateway.test'], [header, `Bearer ${token}${'z'.repeat(20 * 1024)}`], ['Content-Length', '0']]), PARSER_431, [token])
}
for (const [name, value] of [['an unknown tenant', 'nobody'], ['a tenant header sent twice', ['acme', 'acme']], ['a path-like tenant', '../acme'], ['an upper-case tenant name', 'ACME']] as const) {
  const headers: RawHeader[] = (Array.isArray(value) ? value : [value]).map((tenant) => ['X-Tenant-Id', tenant] as const)
  add(`answers 404 TENANT_UNKNOWN to ${name} (native)`, request('GET', '/v4/x', headers), refused(404, 'TENANT_UNKNOWN'))
  const token = secret()
  add(`answers 404 TENANT_UNKNOWN to ${name} (legacy)`, request('POST', EXECUTE, [...headers, ['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json']], '{"input":1}'), refused(404, 'TENANT_UNKNOWN'), [token])
}
add('echoes a valid x-request-id in the error envelope', request('GET', '/internal/x', [['X-Request-Id', 'corpus-request-1']]), { kind: 'refused', status: 403, code: 'FORBIDDEN', requestId: 'corpus-request-1' })
add('replaces an x-request-id of 129 chars with a fresh id in the error envelope', request('GET', '/internal/x', [['X-Request-Id', 'r'.repeat(129)]]), { kind: 'refused', status: 403, code: 'FORBIDDEN', requestId: 'fresh' })
add('replaces an x-request-id with a space with a fresh id in the error envelope', request('GET', '/internal/x', [['X-Request-Id', 'a b']]), { kind: 'refused', status: 403, code: 'FORBIDDEN', requestId: 'fresh' })
add('replaces an x-request-id with a quote with a fresh id in the error envelope', request('GET', '/internal/x', [['X-Request-Id', '"><script>']]), { kind: 'refused', status: 403, code: 'FORBIDDEN', requestId: 'fresh' })

// ---------------------------------------------------------------------------------------------

function upstreamHandler(recorded: RecordedRequest, response: ServerResponse): void {
  const status = recorded.url === '/v4/sessions.start' ? 201 : 200
  const body = status === 201 ? { sessionId: 'sess-corpus', defaults: {}, meta: {} } : { ok: true }
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(JSON.stringify(body))
}

/** SPEC 6 envelope: a registry code with its status, JSON, and one request id in header and body. */
function expectEnvelope(response: RawResponse, status: number, code: ErrorCode): void {
  expect({ status: response.status, code: response.json?.error?.code }).toEqual({ status, code })
  expect(ERROR_STATUS[code]).toBe(status)
  expect(response.headers['content-type']).toBe('application/json')
  const requestId = response.headers['x-request-id']
  expect(requestId).toMatch(/^[A-Za-z0-9._:-]{1,128}$/)
  expect(response.json.error).toMatchObject({ code, message: expect.stringMatching(/\S/), requestId })
  expect(response.json.meta).toEqual({ requestId, timingMs: { total: expect.any(Number) } })
}

function describeExchange(result: RawResult): string {
  return `${result.bytes.toString('latin1').slice(0, 400)} [closedByServer=${result.closedByServer} timedOut=${result.timedOut} error=${result.errorCode ?? ''}]`
}

describe('bad-input corpus over raw sockets', () => {
  const upstream = useRecordingUpstream(upstreamHandler)
  beforeAll(() => {
    upstream.server.maxHeadersCount = 0
  })
  // Another loopback server that requests name (absolute-form targets, Host): it must hear nothing.
  const decoy = useRecordingUpstream()
  const gw = useGateway(() =>
    testConfig(upstream.url, {
      internalAdmin: { pathPrefixes: ['/internal', '/v4/internal'] },
      credentials: { queryParam: 'token' },
      limits: { bodyBytes: BODY_LIMIT }
    })
  )
  /** Requests the tenant upstream got while a case ran; any other arrived late, outside its case. */
  let observedForwards = 0

  function withPorts(bytes: Buffer): Buffer {
    const text = bytes.toString('latin1')
    if (!text.includes(DECOY_PORT) && !text.includes(UPSTREAM_PORT)) return bytes
    return Buffer.from(text.replaceAll(DECOY_PORT, new URL(decoy.url).port).replaceAll(UPSTREAM_PORT, new URL(upstream.url).port), 'latin1')
  }

  it('holds at least 200 cases with unique names', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(200)
    expect(new Set(corpus.map((entry) => entry.name)).size).toBe(corpus.length)
  })

  /** Sends one case on a fresh socket and checks what it expects, the answer and the upstream alike. */
  async function runCase(entry: CorpusCase): Promise<void> {
    const before = upstream.requests.length
    const result = await rawExchange(gw.url, withPorts(entry.bytes), { timeoutMs: 2_000, ...entry.options })
    const reached = upstream.requests.slice(before)
    observedForwards += reached.length
    const response = result.response
    for (const planted of entry.secrets) expect(result.bytes.includes(planted), `the answer echoes a planted secret: ${describeExchange(result)}`).toBe(false)
    expect(decoy.requests).toHaveLength(0)

    switch (entry.expect.kind) {
      case 'refused':
      case 'parser': {
        expect(response, `no HTTP answer: ${describeExchange(result)}`).toBeDefined()
        expectEnvelope(response as RawResponse, entry.expect.status, entry.expect.code)
        expect(reached).toEqual([])
        if (entry.expect.kind === 'parser') {
          // RFC 9112 11.2: after a framing error the connection cannot be trusted; the gateway says so and closes.
          expect((response as RawResponse).headers.connection).toBe('close')
          expect(result.closedByServer).toBe(true)
          expect(result.timedOut).toBe(false)
        }
        if (entry.expect.kind === 'refused' && entry.expect.requestId !== undefined) {
          if (entry.expect.requestId === 'fresh') expect((response as RawResponse).headers['x-request-id']).toMatch(UUID)
          else expect((response as RawResponse).headers['x-request-id']).toBe(entry.expect.requestId)
        }
        break
      }
      case 'forwarded': {
        expect(response?.status, describeExchange(result)).toBe(200)
        expect(reached.map((recorded) => `${recorded.method} ${recorded.url}`)).toEqual([`${entry.expect.method} ${entry.expect.url}`])
        entry.expect.check?.(reached[0] as RecordedRequest)
        break
      }
      case 'refused-or-verbatim': {
        expect(response, `no HTTP answer: ${describeExchange(result)}`).toBeDefined()
        if ((response as RawResponse).status !== 200) {
          expectEnvelope(response as RawResponse, 400, 'INVALID_REQUEST')
          expect(reached).toEqual([])
          break
        }
        const executions = reached.filter((recorded) => recorded.url !== '/v4/sessions.start')
        expect(executions).toHaveLength(1)
        // SPEC 4: input is carried, not rewritten: a number no double holds must not arrive as null or rounded.
        expect((executions[0] as RecordedRequest).body.toString('utf8'), 'the gateway altered a JSON number on the way upstream').toContain(entry.expect.literal)
        break
      }
      case 'stalled': {
        expect(result.timedOut, describeExchange(result)).toBe(true)
        expect(result.bytes.length).toBe(0)
        expect(reached).toEqual([])
        break
      }
    }
  }

  for (const entry of corpus) it(entry.name, () => runCase(entry))

  it('forwarded nothing outside the case that sent it, and nothing to the server that requests named', () => {
    expect(upstream.requests).toHaveLength(observedForwards)
    expect(decoy.requests).toHaveLength(0)
  })

  it('pollutes no prototype with __proto__ or constructor members', () => {
    const probe: Record<string, unknown> = {}
    expect(probe.policy).toBeUndefined()
    expect(probe.isAdmin).toBeUndefined()
    expect(Object.prototype).not.toHaveProperty('isAdmin')
  })

  it('still answers a legacy call correctly after the corpus', async () => {
    const before = upstream.requests.length
    const answer = await send(gw.url, EXECUTE, { headers: { authorization: 'Bearer after-corpus-token', 'x-request-id': 'after-corpus-1' }, json: { input: { ok: 1 }, policy: 'strict' } })
    expect(answer.status).toBe(200)
    expect(answer.headers['x-request-id']).toBe('after-corpus-1')
    expect(answer.json).toMatchObject({ ok: true, meta: { requestId: 'after-corpus-1', timingMs: { total: expect.any(Number) } } })
    const [call] = upstream.requests.slice(before)
    expect(call).toMatchObject({ method: 'POST', url: '/v4/execute' })
    expect(upstreamJson(call as RecordedRequest)).toEqual({ input: { ok: 1 }, policy: 'strict' })
    expect((call as RecordedRequest).headers.authorization).toBe('Bearer after-corpus-token')
  })

  it('still answers a native call correctly after the corpus', async () => {
    const before = upstream.requests.length
    const answer = await send(gw.url, '/v4/after-corpus?x=1', { headers: { 'x-api-key': 'native-key' } })
    expect(answer.status).toBe(200)
    expect(answer.json).toEqual({ ok: true })
    expect(upstream.requests.slice(before).map((recorded) => `${recorded.method} ${recorded.url} ${String(recorded.headers['x-api-key'])}`)).toEqual(['GET /v4/after-corpus?x=1 native-key'])
  })

  it('logs no 5xx gateway error for any corpus case (every fault in the corpus is the client\'s)', () => {
    // A client that breaks its framing mid-body or goes away is neither a gateway bug
    // (INTERNAL_ERROR) nor an unreachable upstream (UPSTREAM_UNAVAILABLE).
    const errors = gw.logs.lines()
      .filter((line) => typeof line.level === 'number' && line.level >= 50)
      .map((line) => `${String(line.msg)}: ${String((line.err as { message?: unknown } | undefined)?.message)}`)
    expect(errors).toEqual([])
    // An upstream failure is logged at debug, and a request whose client left at info: the access
    // lines say what each request came to, and none of the corpus may be a 5xx.
    const requests = gw.logs.lines().filter((line) => line.msg === 'request')
    expect(requests.length).toBeGreaterThan(100)
    expect(requests.filter((line) => typeof line.status === 'number' && line.status >= 500).map((line) => `${String(line.requestId)} ${String(line.status)} ${String(line.error)}`)).toEqual([])
  })

  it('writes no planted secret into the log', () => {
    const log = gw.logs.text()
    // The log is not empty: the refusals were logged, only without their secrets.
    expect(log).toContain('"error":"REQUEST_HEADERS_TOO_LARGE"')
    expect(log).toContain('"status":403')
    const leaked = allSecrets.filter((planted) => log.includes(planted))
    expect(leaked).toEqual([])
  })
})
