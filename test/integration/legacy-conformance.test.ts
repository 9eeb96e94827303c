import { describe, expect, it } from 'vitest'
import { send } from '../helpers/http.js'
import { useRecordingUpstream } from '../helpers/recording-upstream.js'
import { testConfig, useGateway } from '../helpers/start-gateway.js'

const ALICE = { authorization: 'Bearer demo-token-alice' }

// Issue 25 point 9 (SPEC 4: "A 400 names the offending field by JSON pointer"): a number
// JSON.parse cannot carry unchanged is refused, and the refusal names where it is.
describe('a legacy body number JSON cannot carry exactly is refused naming its field', () => {
  const upstream = useRecordingUpstream()
  const gw = useGateway(() =>
    testConfig(upstream.url, {
      tenants: {
        acme: { upstream: { staging: upstream.url } },
        remap: { upstream: { staging: upstream.url }, legacy: { fields: { input: '/payload/data', policy: '/governance/policy', risk: '/level', stateId: '/client/sid' } } }
      }
    })
  )

  /** The body as raw bytes: JSON.stringify could not write these numerals. */
  function post(path: string, body: string, tenant = 'acme') {
    return send(gw.url, path, { headers: { ...ALICE, 'x-tenant-id': tenant, 'content-type': 'application/json' }, body })
  }

  it.each([
    ['/v1/headless/runs', '{"input":1,"policy":1e400}', '/policy'],
    ['/v1/headless/runs', '{"input":1,"risk":12345678901234567890}', '/risk'],
    ['/v1/runs/invoke', '{"input":1,"stateId":1e400}', '/stateId'],
    ['/v1/runs/invoke', '{"input":1,"state":{"risk":1e-400}}', '/state/risk'],
    // In a field the gateway carries: the pointer goes down to the number.
    ['/v1/headless/runs', '{"input":{"ids":[1,2,12345678901234567890]}}', '/input/ids/2'],
    ['/v1/headless/runs', '{"input":1,"extra":{"a~b/c":1e400}}', '/extra/a~0b~1c']
  ])('POST %s %s: 400 INVALID_REQUEST at %s, no V4 call', async (path, body, pointer) => {
    const before = upstream.requests.length
    const answer = await post(path, body)
    expect(answer.status).toBe(400)
    expect(answer.json.error.code).toBe('INVALID_REQUEST')
    expect(answer.json.error.details).toEqual([expect.objectContaining({ pointer })])
    expect(answer.json.error.message).toContain(pointer)
    expect(upstream.requests.length).toBe(before)
  })

  it.each([
    ['/v1/headless/runs', '{"payload":{"data":1},"governance":{"policy":1e400}}', '/governance/policy'],
    ['/v1/headless/runs', '{"payload":{"data":1},"level":12345678901234567890}', '/level'],
    ['/v1/runs/invoke', '{"payload":{"data":1},"client":{"sid":1e400}}', '/client/sid']
  ])('with a remapped legacy.fields, POST %s %s names the configured pointer %s', async (path, body, pointer) => {
    const answer = await post(path, body, 'remap')
    expect(answer.status).toBe(400)
    expect(answer.json.error.details).toEqual([expect.objectContaining({ pointer })])
  })
})
