import { connect } from 'node:net'

/**
 * Raw HTTP/1.1 over node:net, for what no HTTP client will send: malformed request lines and
 * headers, hand-made framing, truncated bodies. Also reads back exactly what the server wrote,
 * including a response that breaks off before its declared length.
 */

export interface RawResponse {
  status: number
  statusText: string
  /** Lower-cased names; repeated fields joined with ", ". */
  headers: Record<string, string>
  body: Buffer
  text: string
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: any // eslint-disable-line @typescript-eslint/no-explicit-any -- test assertions read arbitrary shapes
  /** False when the body ended before its framing said it would (declared length, last chunk). */
  complete: boolean
  /** Bytes the framing declared (`content-length`), when it did. */
  declaredLength?: number
}

export interface RawResult {
  /** Everything the server wrote. */
  bytes: Buffer
  /** The first response in `bytes`, when a status line and headers arrived. */
  response?: RawResponse
  /** The server ended or reset the connection before the client gave up. */
  closedByServer: boolean
  /** The client gave up after `timeoutMs` with the connection still open. */
  timedOut: boolean
  /** A socket error the client saw (`ECONNRESET` after a reset), if any. */
  errorCode?: string
}

export interface RawOptions {
  /** Give up (and destroy the socket) after this long. Default 2,000 ms. */
  timeoutMs?: number
  /** Send FIN after the request: the client stops writing but keeps reading. */
  halfClose?: boolean
  /** Resolve once one complete response arrived, without waiting for the server to close (keep-alive). */
  stopAfterResponse?: boolean
}

export type RawHeader = readonly [name: string, value: string] | string

/**
 * Builds a request from a request line, header lines (`[name, value]` or a raw line written as
 * is) and a body. Nothing is added: no Host, no Content-Length, no Connection, unless given.
 */
export function buildRawRequest(requestLine: string, headers: readonly RawHeader[], body: string | Buffer = ''): Buffer {
  const lines = headers.map((header) => (typeof header === 'string' ? header : `${header[0]}: ${header[1]}`))
  const head = Buffer.from(`${requestLine}\r\n${lines.map((line) => `${line}\r\n`).join('')}\r\n`, 'latin1')
  return Buffer.concat([head, typeof body === 'string' ? Buffer.from(body, 'utf8') : body])
}

function decodeChunked(bytes: Buffer): { body: Buffer; complete: boolean } {
  const parts: Buffer[] = []
  let offset = 0
  for (;;) {
    const lineEnd = bytes.indexOf('\r\n', offset)
    if (lineEnd === -1) return { body: Buffer.concat(parts), complete: false }
    const size = Number.parseInt(bytes.subarray(offset, lineEnd).toString('latin1').split(';', 1)[0] as string, 16)
    if (!Number.isFinite(size)) return { body: Buffer.concat(parts), complete: false }
    if (size === 0) return { body: Buffer.concat(parts), complete: bytes.indexOf('\r\n', lineEnd + 2) !== -1 }
    const start = lineEnd + 2
    if (bytes.length < start + size + 2) {
      parts.push(bytes.subarray(start, Math.min(bytes.length, start + size)))
      return { body: Buffer.concat(parts), complete: false }
    }
    parts.push(bytes.subarray(start, start + size))
    offset = start + size + 2
  }
}

/**
 * Parses the first response in `bytes`. `ended` says the connection is over, which completes a
 * body framed by the close. Returns undefined until the whole head has arrived.
 */
export function parseRawResponse(bytes: Buffer, ended: boolean, requestMethod = 'GET'): RawResponse | undefined {
  const headEnd = bytes.indexOf('\r\n\r\n')
  if (headEnd === -1) return undefined
  const [statusLine = '', ...headerLines] = bytes.subarray(0, headEnd).toString('latin1').split('\r\n')
  const match = /^HTTP\/\d\.\d (\d{3}) ?(.*)$/.exec(statusLine)
  if (match === null) return undefined
  const headers: Record<string, string> = {}
  for (const line of headerLines) {
    const colon = line.indexOf(':')
    if (colon === -1) continue
    const name = line.slice(0, colon).trim().toLowerCase()
    const value = line.slice(colon + 1).trim()
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`
  }
  const status = Number(match[1])
  const rest = bytes.subarray(headEnd + 4)
  let body: Buffer
  let complete: boolean
  let declaredLength: number | undefined
  if (requestMethod === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200)) {
    body = Buffer.alloc(0)
    complete = true
  } else if (/\bchunked\b/i.test(headers['transfer-encoding'] ?? '')) {
    ;({ body, complete } = decodeChunked(rest))
  } else if (headers['content-length'] !== undefined) {
    declaredLength = Number(headers['content-length'])
    body = rest.subarray(0, declaredLength)
    complete = body.length === declaredLength
  } else {
    body = rest
    complete = ended
  }
  const text = body.toString('utf8')
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status, statusText: match[2] ?? '', headers, body, text, json, complete, declaredLength }
}

/**
 * Writes `request` on a fresh connection and collects the answer until the server closes, the
 * client gives up (`timeoutMs`), or, with `stopAfterResponse`, one whole answer is in.
 * Never rejects: a reset is reported in `errorCode`, a silent server in `timedOut`.
 */
export function rawExchange(baseUrl: string, request: string | Buffer, options: RawOptions = {}): Promise<RawResult> {
  const { hostname, port } = new URL(baseUrl)
  const method = (typeof request === 'string' ? request : request.subarray(0, 16).toString('latin1')).split(' ', 1)[0] ?? 'GET'
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let closedByServer = false
    let timedOut = false
    let errorCode: string | undefined
    let settled = false
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      socket.write(request)
      if (options.halfClose === true) socket.end()
    })
    const timer = setTimeout(() => {
      timedOut = true
      finish()
    }, options.timeoutMs ?? 2_000)

    function finish(): void {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      const bytes = Buffer.concat(chunks)
      resolve({ bytes, response: parseRawResponse(bytes, closedByServer, method), closedByServer, timedOut, errorCode })
    }

    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      if (options.stopAfterResponse !== true) return
      if (parseRawResponse(Buffer.concat(chunks), false, method)?.complete === true) finish()
    })
    socket.on('end', () => {
      closedByServer = true
    })
    socket.on('error', (error: NodeJS.ErrnoException) => {
      errorCode = error.code ?? error.message
      closedByServer = true
    })
    socket.on('close', finish)
  })
}
