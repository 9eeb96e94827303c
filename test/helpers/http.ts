import { request as undiciRequest, Agent } from 'undici'

export interface SendOptions {
  method?: string
  headers?: Record<string, string | string[]>
  body?: string | Buffer
  /** Serialised as JSON with content-type application/json. */
  json?: unknown
}

export interface Answer {
  status: number
  headers: Record<string, string | string[] | undefined>
  text: string
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: any // eslint-disable-line @typescript-eslint/no-explicit-any -- test assertions read arbitrary shapes
}

// Short keep-alive, so a closed gateway never leaves a test waiting on a pooled socket.
const agent = new Agent({ keepAliveTimeout: 10, keepAliveMaxTimeout: 10 })

/** One HTTP call to a listener under test, body read whole. */
export async function send(baseUrl: string, path: string, options: SendOptions = {}): Promise<Answer> {
  const headers: Record<string, string | string[]> = { ...options.headers }
  let body = options.body
  if (options.json !== undefined) {
    body = JSON.stringify(options.json)
    headers['content-type'] ??= 'application/json'
  }
  const response = await undiciRequest(new URL(path, baseUrl), { method: (options.method ?? (body === undefined ? 'GET' : 'POST')) as 'GET', headers, body, dispatcher: agent })
  const text = await response.body.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.statusCode, headers: response.headers, text, json }
}
