import type { IncomingHttpHeaders } from 'node:http'
import { Agent, type Dispatcher } from 'undici'
import { GatewayError } from '../errors/registry.js'
import { mapUpstreamError } from './map-upstream-error.js'

/** Answers the gateway must read (sessions.start, executions) are capped: a V4 answer is small. */
export const MAX_UPSTREAM_BODY_BYTES = 16 * 1024 * 1024

export interface UpstreamRequest {
  origin: string
  method: string
  path: string
  headers: Record<string, string>
  body?: string
  signal?: AbortSignal
  /** Per request, so a reload can change it: no headers or body progress for this long is a timeout. */
  timeoutMs: number
}

export interface UpstreamResponse {
  statusCode: number
  headers: IncomingHttpHeaders
  body: Buffer
  durationMs: number
}

export interface UpstreamClient {
  /** Sends a request and reads the whole answer. Fails only with a GatewayError. */
  request(request: UpstreamRequest): Promise<UpstreamResponse>
  /** The shared connection pool, also used by native passthrough. */
  readonly dispatcher: Dispatcher
  close(): Promise<void>
}

export interface UpstreamClientOptions {
  connectTimeoutMs: number
}

export function createUpstreamClient(options: UpstreamClientOptions): UpstreamClient {
  const agent = new Agent({
    connect: { timeout: options.connectTimeoutMs },
    keepAliveTimeout: 4_000
  })

  async function request(upstreamRequest: UpstreamRequest): Promise<UpstreamResponse> {
    const startedAt = performance.now()
    let response: Dispatcher.ResponseData
    try {
      response = await agent.request({
        origin: upstreamRequest.origin,
        method: upstreamRequest.method as Dispatcher.HttpMethod,
        path: upstreamRequest.path,
        headers: upstreamRequest.headers,
        body: upstreamRequest.body ?? null,
        signal: upstreamRequest.signal,
        headersTimeout: upstreamRequest.timeoutMs,
        bodyTimeout: upstreamRequest.timeoutMs
      })
    } catch (error) {
      throw mapUpstreamError(error)
    }
    const body = await readCapped(response.body)
    return { statusCode: response.statusCode, headers: response.headers, body, durationMs: performance.now() - startedAt }
  }

  return {
    request,
    dispatcher: agent,
    close: () => agent.close()
  }
}

async function readCapped(body: Dispatcher.ResponseData['body']): Promise<Buffer> {
  const chunks: Buffer[] = []
  let bytes = 0
  try {
    for await (const chunk of body) {
      bytes += (chunk as Buffer).length
      if (bytes > MAX_UPSTREAM_BODY_BYTES) {
        body.destroy()
        throw new GatewayError('UPSTREAM_BAD_RESPONSE', `the upstream answer is larger than ${MAX_UPSTREAM_BODY_BYTES} bytes`)
      }
      chunks.push(chunk as Buffer)
    }
  } catch (error) {
    const mapped = mapUpstreamError(error)
    // Headers arrived, so the upstream was reachable: a body that breaks off is a bad answer.
    if (mapped.code !== 'UPSTREAM_UNAVAILABLE') throw mapped
    throw new GatewayError('UPSTREAM_BAD_RESPONSE', 'the upstream answer broke off before its end', { cause: error })
  }
  return Buffer.concat(chunks, bytes)
}
