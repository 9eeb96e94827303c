import type { Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { serverSpanStatus } from '../../../src/traffic/traced-requests.js'

// SPEC 17 and the HTTP semantic conventions: the SERVER span's status is the one sent, and the
// span is an error for the gateway's failures only. The states are those a response is in when
// its request ends (traffic-kernel.ts); the cut and left cases run over sockets in tracing.test.ts.

const SOCKET = {} as Socket

describe('serverSpanStatus', () => {
  it('a finished answer: its status, an error only for a 5xx', () => {
    expect(serverSpanStatus({ headersSent: true, writableFinished: true, socket: null, statusCode: 200 }, { errorCode: undefined, brokenOffStatus: undefined, bytesOut: 0 })).toEqual({ statusCode: 200, failed: false })
    expect(serverSpanStatus({ headersSent: true, writableFinished: true, socket: null, statusCode: 404 }, { errorCode: 'ROUTE_NOT_FOUND', brokenOffStatus: undefined, bytesOut: 0 })).toEqual({ statusCode: 404, failed: false })
    expect(serverSpanStatus({ headersSent: true, writableFinished: true, socket: null, statusCode: 502 }, { errorCode: 'UPSTREAM_UNAVAILABLE', brokenOffStatus: undefined, bytesOut: 0 })).toEqual({ statusCode: 502, failed: true })
  })

  it('an answer cut after its head went: the status sent, and an error', () => {
    expect(serverSpanStatus({ headersSent: true, writableFinished: false, socket: SOCKET, statusCode: 200 }, { errorCode: 'UPSTREAM_BAD_RESPONSE', brokenOffStatus: 502, bytesOut: 10 })).toEqual({ statusCode: 200, failed: true })
  })

  it('nothing sent: no status; an error only when the request failed on the gateway’s side (a 5xx code)', () => {
    const left = { headersSent: false, writableFinished: false, socket: SOCKET, statusCode: 200 }
    expect(serverSpanStatus(left, { errorCode: undefined, brokenOffStatus: undefined, bytesOut: 0 })).toEqual({ statusCode: undefined, failed: false })
    expect(serverSpanStatus(left, { errorCode: 'UPSTREAM_TIMEOUT', brokenOffStatus: undefined, bytesOut: 0 })).toEqual({ statusCode: undefined, failed: true })
    expect(serverSpanStatus(left, { errorCode: 'IDEMPOTENCY_KEY_REUSED', brokenOffStatus: undefined, bytesOut: 0 })).toEqual({ statusCode: undefined, failed: false })
  })

  it('a pipelined answer whose connection closed while it waited its turn: its head never reached a socket, so no status', () => {
    expect(serverSpanStatus({ headersSent: true, writableFinished: false, socket: null, statusCode: 200 }, { errorCode: undefined, brokenOffStatus: undefined, bytesOut: 5 })).toEqual({ statusCode: undefined, failed: false })
  })

  it('a streamed answer whose client left before its first body bytes: Node had not written the head, so no status', () => {
    expect(serverSpanStatus({ headersSent: true, writableFinished: false, socket: SOCKET, statusCode: 200 }, { errorCode: undefined, brokenOffStatus: undefined, bytesOut: 0 })).toEqual({ statusCode: undefined, failed: false })
  })
})
