import { connect } from 'node:net'
import { describe, expect, it } from 'vitest'
import { useSimulatorGateway } from '../helpers/simulator-gateway.js'

const BODY = '{"input":{"q":1}}'

/**
 * Sends a request's head with `Expect: 100-continue`, then its body only once a 100 Continue
 * arrives, as curl and other clients do; resolves with everything the gateway wrote.
 */
function expectContinue(baseUrl: string, path: string, headers: Record<string, string>, body: string): Promise<string> {
  const { hostname, port } = new URL(baseUrl)
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) })
    let received = ''
    let sentBody = false
    const head = Object.entries({ host: 'gw.test', 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), expect: '100-continue', connection: 'close', ...headers })
    socket.once('connect', () => socket.write(`POST ${path} HTTP/1.1\r\n${head.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n`))
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1')
      if (!sentBody && received.startsWith('HTTP/1.1 100 Continue\r\n\r\n')) {
        sentBody = true
        socket.write(body)
      }
    })
    socket.once('error', reject)
    socket.once('close', () => resolve(received))
    setTimeout(() => socket.destroy(), 5_000).unref()
  })
}

describe('Expect: 100-continue (RFC 9110 10.1.1)', () => {
  const { gw } = useSimulatorGateway({ limits: { bodyBytes: 1_000 } })

  it.each([
    ['legacy', '/v1/headless/runs'],
    ['native', '/v4/execute']
  ])('sends 100 Continue and then the answer when it will read the body: %s', async (_class, path) => {
    const written = await expectContinue(gw.url, path, { authorization: 'Bearer demo-token-alice' }, BODY)
    expect(written).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /)
  })

  it.each([
    ['a declared length over limits.bodyBytes', { authorization: 'Bearer demo-token-alice', 'content-length': '5000' }, 413],
    ['a service key on a runtime route', { authorization: 'Bearer key_demo_admin' }, 401],
    ['a body that is not JSON by its type', { authorization: 'Bearer demo-token-alice', 'content-type': 'text/plain' }, 415]
  ])('answers a legacy request it refuses before reading its body without a 100 Continue: %s', async (_case, headers, status) => {
    const written = await expectContinue(gw.url, '/v1/headless/runs', headers, BODY)
    expect(written).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `))
    expect(written).not.toContain('100 Continue')
  })
})
