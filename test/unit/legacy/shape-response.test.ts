import { afterEach, describe, expect, it, vi } from 'vitest'
import { shapeLegacyResponse, type ShapeOptions } from '../../../src/legacy/shape-response.js'

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' }

function options(overrides: Partial<ShapeOptions> = {}): ShapeOptions {
  return { requestId: 'gw-req-1', totalMs: 12.5, sessionId: undefined, responseFields: [], ...overrides }
}

function shapeJson(document: unknown, overrides: Partial<ShapeOptions> = {}, statusCode = 200) {
  const shaped = shapeLegacyResponse(statusCode, JSON_HEADERS, Buffer.from(JSON.stringify(document)), options(overrides))
  return { shaped, json: JSON.parse(shaped.payload.toString()) as Record<string, any> } // eslint-disable-line @typescript-eslint/no-explicit-any -- assertions read arbitrary shapes
}

describe('shapeLegacyResponse meta', () => {
  it('fills meta.requestId and meta.timingMs.total when the upstream left out meta', () => {
    expect(shapeJson({ output: 1 }).json).toEqual({ output: 1, meta: { requestId: 'gw-req-1', timingMs: { total: 12.5 } } })
  })

  it.each(['{"output":{"id":12345678901234567890}}', '{"output":123456789.123456789}', '{"output":1e400}', '{"output":[1e-400],"meta":{}}'])('sends an answer with a number JSON cannot hold (%s) as it came, rather than change it to fill meta', (text) => {
    for (const sessionId of [undefined, 'ses_1']) {
      const shaped = shapeLegacyResponse(200, JSON_HEADERS, Buffer.from(text), options({ sessionId, responseFields: [{ from: '/output', to: '/result' }] }))
      expect(shaped.payload.toString()).toBe(text)
    }
  })

  it('sends an answer nested too deeply to serialise again as it came, rather than fail after V4 ran the call', () => {
    const text = `{"output":${'['.repeat(100_000)}${']'.repeat(100_000)}}`
    for (const responseFields of [[], [{ from: '/output', to: '/result' }]]) {
      const shaped = shapeLegacyResponse(200, { ...JSON_HEADERS, 'content-length': String(text.length) }, Buffer.from(text), options({ responseFields }))
      expect(shaped.payload.toString()).toBe(text)
      expect(shaped.headers['content-type']).toBe(JSON_HEADERS['content-type'])
    }
  })

  it('leaves out a strong validator and the digests of the upstream\'s bytes when it sends other bytes, and keeps them when it sends those bytes', () => {
    const described = { ...JSON_HEADERS, etag: '"v4-etag"', 'content-digest': 'sha-256=:AAAA:', 'repr-digest': 'sha-256=:BBBB:', digest: 'SHA-256=CCCC', 'content-md5': 'DDDD', 'cache-control': 'no-store' }
    const filled = shapeLegacyResponse(200, described, Buffer.from('{"output":1}'), options())
    expect(filled.payload.toString()).not.toBe('{"output":1}')
    expect(filled.headers).toEqual({ ...JSON_HEADERS, 'cache-control': 'no-store' })
    const complete = '{"output":1,"meta":{"requestId":"r","timingMs":{"total":1}}}'
    for (const responseFields of [[], [{ from: '/nothing', to: '/x' }]]) {
      const asSent = shapeLegacyResponse(200, described, Buffer.from(complete), options({ responseFields }))
      expect(asSent.payload.toString()).toBe(complete)
      expect(asSent.headers).toEqual(described)
    }
  })

  it('still fills meta in an answer whose long numerals JSON holds unchanged', () => {
    expect(shapeLegacyResponse(200, JSON_HEADERS, Buffer.from('{"output":1.50000000000000000}'), options()).payload.toString()).toBe('{"output":1.5,"meta":{"requestId":"gw-req-1","timingMs":{"total":12.5}}}')
  })

  it('keeps the upstream meta.requestId and meta.timingMs.total', () => {
    const meta = { requestId: 'up-1', timingMs: { total: 3 }, executionId: 'exe_1' }
    expect(shapeJson({ output: 1, meta }).json.meta).toEqual(meta)
  })

  it('fills only the missing meta.timingMs.total next to other timings', () => {
    expect(shapeJson({ meta: { requestId: 'up-1', timingMs: { backend: 2 } } }).json.meta).toEqual({ requestId: 'up-1', timingMs: { backend: 2, total: 12.5 } })
  })

  it('fills meta.sessionId on session-execute when the upstream left it out', () => {
    expect(shapeJson({ output: 1 }, { sessionId: 'ses_1' }).json.meta.sessionId).toBe('ses_1')
  })

  it('keeps an upstream meta.sessionId', () => {
    expect(shapeJson({ meta: { sessionId: 'ses_upstream' } }, { sessionId: 'ses_1' }).json.meta.sessionId).toBe('ses_upstream')
  })

  it('adds no meta.sessionId outside session-execute', () => {
    expect(shapeJson({ output: 1 }).json.meta).not.toHaveProperty('sessionId')
  })

  it('leaves a meta that is not an object untouched', () => {
    expect(shapeJson({ output: 1, meta: 'opaque' }, { sessionId: 'ses_1' }).json).toEqual({ output: 1, meta: 'opaque' })
  })

  it('shapes an error answer too, keeping its status', () => {
    const { shaped, json } = shapeJson({ error: { code: 'CONFLICT' } }, {}, 409)
    expect(shaped.statusCode).toBe(409)
    expect(json).toEqual({ error: { code: 'CONFLICT' }, meta: { requestId: 'gw-req-1', timingMs: { total: 12.5 } } })
  })
})

describe('shapeLegacyResponse pass-through', () => {
  it.each(['[1,2,3]', '"text"', '42', 'null', 'true'])('returns non-object JSON byte for byte: %s', (text) => {
    const body = Buffer.from(text)
    const shaped = shapeLegacyResponse(200, JSON_HEADERS, body, options({ sessionId: 'ses_1' }))
    expect(shaped.payload).toBe(body)
  })

  it('returns a body that is not JSON byte for byte', () => {
    const body = Buffer.from([0xff, 0x00, 0x7b, 0x22])
    const shaped = shapeLegacyResponse(200, { 'content-type': 'application/octet-stream' }, body, options())
    expect(Buffer.compare(Buffer.from(shaped.payload), body)).toBe(0)
  })

  it('returns a JSON object body without a JSON content type byte for byte', () => {
    const body = Buffer.from('{"output":1}')
    expect(shapeLegacyResponse(200, { 'content-type': 'text/plain' }, body, options()).payload).toBe(body)
  })

  it('returns a broken JSON body byte for byte', () => {
    const body = Buffer.from('{"output":')
    expect(shapeLegacyResponse(200, JSON_HEADERS, body, options()).payload).toBe(body)
  })

  it.each([
    ['latin-1 declared', 'application/json; charset=iso-8859-1', Buffer.concat([Buffer.from('{"output":"caf'), Buffer.from([0xe9]), Buffer.from('"}')])],
    ['broken UTF-8', 'application/json', Buffer.concat([Buffer.from('{"output":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')])]
  ])('returns a JSON object whose bytes are not UTF-8 byte for byte (%s), not with U+FFFD in them', (_case, type, body) => {
    const shaped = shapeLegacyResponse(200, { 'content-type': type }, body, options())
    expect(shaped.payload).toBe(body)
    expect(shaped.headers['content-type']).toBe(type)
  })

  it('keeps the upstream status', () => {
    expect(shapeLegacyResponse(202, { 'content-type': 'text/plain' }, Buffer.from('queued'), options()).statusCode).toBe(202)
  })

  it('keeps end-to-end headers and drops hop-by-hop and framing headers', () => {
    const shaped = shapeLegacyResponse(
      200,
      { ...JSON_HEADERS, 'x-upstream': 'yes', connection: 'keep-alive', 'keep-alive': 'timeout=5', 'transfer-encoding': 'chunked', 'content-length': '99', 'content-encoding': 'identity' },
      Buffer.from('{}'),
      options()
    )
    expect(shaped.headers).toEqual({ ...JSON_HEADERS, 'x-upstream': 'yes' })
  })
})

describe('shapeLegacyResponse with the meta complete', () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })
  const complete = Buffer.from(JSON.stringify({ output: 1, meta: { requestId: 'up-1', sessionId: 'ses_up', timingMs: { total: 3 } } }))

  it('sends an answer that already has its meta as it came, without parsing it', () => {
    const parse = vi.spyOn(JSON, 'parse')
    const shaped = shapeLegacyResponse(200, { ...JSON_HEADERS, 'x-upstream': 'yes', 'content-length': '9' }, complete, options({ sessionId: 'ses_1' }))
    expect(parse).not.toHaveBeenCalled()
    expect(shaped.payload).toBe(complete)
    expect(shaped.headers).toEqual({ ...JSON_HEADERS, 'x-upstream': 'yes' })
  })

  it('parses an answer whose meta lacks the session id it needs', () => {
    const parse = vi.spyOn(JSON, 'parse')
    const withoutSession = Buffer.from(JSON.stringify({ output: 1, meta: { requestId: 'up-1', timingMs: { total: 3 } } }))
    const { payload } = shapeLegacyResponse(200, JSON_HEADERS, withoutSession, options({ sessionId: 'ses_1' }))
    expect(parse).toHaveBeenCalledOnce()
    expect(JSON.parse(payload.toString()).meta.sessionId).toBe('ses_1')
  })

  // The usual V4 answer, compact, pretty-printed or with whitespace around it: not serialised again.
  const FULL_META = { requestId: 'req_1', executionId: 'exe_1', timingMs: { total: 3.2 }, sessionId: 'ses_1' }
  const answer = { output: { text: 'done', tokens: 42 }, effective: { policy: 'default' }, meta: FULL_META }
  it.each([
    ['compact', JSON.stringify(answer)],
    ['pretty-printed', JSON.stringify(answer, null, 2)],
    ['with whitespace around it', `\r\n\t ${JSON.stringify({ meta: FULL_META, output: 1 })} \n`],
    ['with spaces around its names', '{ "meta" : { "requestId" : 1 , "timingMs" : { "total" : 0 } , "sessionId" : "s" } }']
  ])('sends a %s answer byte for byte', (_case, text) => {
    const body = Buffer.from(text)
    expect(shapeLegacyResponse(200, JSON_HEADERS, body, options({ sessionId: 'ses_1' })).payload).toBe(body)
  })

  it.each([
    ['a content-encoding', { ...JSON_HEADERS, 'content-encoding': 'identity' }, options()],
    ['responseFields to copy', JSON_HEADERS, options({ responseFields: [{ from: '/output', to: '/result' }] })]
  ])('parses it all the same with %s', (_case, headers, shapeOptions) => {
    const parse = vi.spyOn(JSON, 'parse')
    const shaped = shapeLegacyResponse(200, headers, complete, shapeOptions)
    expect(parse).toHaveBeenCalledOnce()
    expect(shaped.headers).not.toHaveProperty('content-encoding')
  })
})

describe('shapeLegacyResponse responseFields', () => {
  it('copies a field to another name and keeps the original', () => {
    const { json } = shapeJson({ output: { echo: 1 } }, { responseFields: [{ from: '/output', to: '/result' }] })
    expect(json.result).toEqual({ echo: 1 })
    expect(json.output).toEqual({ echo: 1 })
  })

  it('copies a meta field that the gateway filled', () => {
    const { json } = shapeJson({ output: 1 }, { sessionId: 'ses_1', responseFields: [{ from: '/meta/sessionId', to: '/session_id' }] })
    expect(json.session_id).toBe('ses_1')
  })

  it('creates the objects on the way to a nested target', () => {
    expect(shapeJson({ output: 2 }, { responseFields: [{ from: '/output', to: '/legacy/result/value' }] }).json.legacy).toEqual({ result: { value: 2 } })
  })

  it('creates nothing when the source is missing', () => {
    expect(shapeJson({ output: 1 }, { responseFields: [{ from: '/missing', to: '/result' }] }).json).not.toHaveProperty('result')
  })

  it('applies the copies in order, so a later copy can read an earlier one', () => {
    const { json } = shapeJson({ output: 1 }, { responseFields: [{ from: '/output', to: '/a' }, { from: '/a', to: '/b' }] })
    expect(json.b).toBe(1)
  })
})
