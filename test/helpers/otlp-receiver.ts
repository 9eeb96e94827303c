import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
// protobufjs's static code generated from the published opentelemetry-proto, as the OpenTelemetry
// JS project ships it (@opentelemetry/otlp-transformer 0.216, the last release with it, installed
// under the alias otlp-proto-decoder: package.json).
import generatedRoot from 'otlp-proto-decoder/build/src/generated/root.js'
import { listenOnLoopback } from './http-server.js'
import { once, ownedBySuite, ownedByTest } from './teardown.js'

/** One exported span, decoded from either OTLP/HTTP encoding into the same plain shape. */
export interface ExportedSpan {
  traceId: string
  spanId: string
  /** '' for a root span. */
  parentSpanId: string
  name: string
  kind: 'INTERNAL' | 'SERVER' | 'CLIENT' | 'PRODUCER' | 'CONSUMER' | 'UNSPECIFIED'
  attributes: Record<string, string | number | boolean>
  links: { traceId: string; spanId: string }[]
  /** 0 unset, 1 ok, 2 error. */
  statusCode: number
  resource: Record<string, string | number | boolean>
}

/** How the receiver answers an export: take it, never answer, or refuse it with a status. */
export type ReceiverMode = { kind: 'accept' } | { kind: 'hang' } | { kind: 'refuse'; status: number }

export interface OtlpReceiver {
  /** The traces endpoint: `http://127.0.0.1:<port>/v1/traces`. */
  endpoint: string
  spans: ExportedSpan[]
  /** Every export body as it arrived, to search for bytes that must never leave the gateway. */
  bodies: Buffer[]
  /** The content type and headers of each export. */
  requests: { contentType: string | undefined; headers: IncomingMessage['headers'] }[]
  /** Exports that arrived and are held unanswered (mode `hang`). */
  held: number
  mode: ReceiverMode
  close(): Promise<void>
}

interface ProtobufMessage {
  decode(bytes: Uint8Array): unknown
  toObject(message: unknown, options: Record<string, unknown>): unknown
}

const ExportTraceServiceRequest = (generatedRoot as unknown as { opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: ProtobufMessage } } } } } }).opentelemetry.proto.collector.trace.v1
  .ExportTraceServiceRequest

const KINDS = ['UNSPECIFIED', 'INTERNAL', 'SERVER', 'CLIENT', 'PRODUCER', 'CONSUMER'] as const

interface OtlpKeyValue {
  key: string
  value: { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number }
}

interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes?: OtlpKeyValue[]
  links?: { traceId: string; spanId: string }[]
  status?: { code?: number }
}

interface OtlpRequest {
  resourceSpans?: { resource?: { attributes?: OtlpKeyValue[] }; scopeSpans?: { spans?: OtlpSpan[] }[] }[]
}

/**
 * The request as the proto3 JSON mapping has it, from a protobuf body: bytes as hex (OTLP/JSON
 * writes trace and span ids as hex, not base64), 64-bit integers as strings, enums as numbers.
 */
function decodeProtobuf(body: Buffer): OtlpRequest {
  const message = ExportTraceServiceRequest.decode(body)
  const object = ExportTraceServiceRequest.toObject(message, { longs: String, enums: Number, bytes: Array, defaults: false, arrays: true }) as OtlpRequest
  for (const resourceSpans of object.resourceSpans ?? []) {
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        span.traceId = hex(span.traceId)
        span.spanId = hex(span.spanId)
        span.parentSpanId = span.parentSpanId === undefined ? '' : hex(span.parentSpanId)
        for (const link of span.links ?? []) {
          link.traceId = hex(link.traceId)
          link.spanId = hex(link.spanId)
        }
      }
    }
  }
  return object
}

function hex(bytes: unknown): string {
  return Buffer.from(bytes as number[]).toString('hex')
}

function plainAttributes(attributes: OtlpKeyValue[] | undefined): Record<string, string | number | boolean> {
  const plain: Record<string, string | number | boolean> = {}
  for (const { key, value } of attributes ?? []) {
    if (value.stringValue !== undefined) plain[key] = value.stringValue
    else if (value.intValue !== undefined) plain[key] = Number(value.intValue)
    else if (value.boolValue !== undefined) plain[key] = value.boolValue
    else if (value.doubleValue !== undefined) plain[key] = value.doubleValue
  }
  return plain
}

function spansOf(request: OtlpRequest): ExportedSpan[] {
  const spans: ExportedSpan[] = []
  for (const resourceSpans of request.resourceSpans ?? []) {
    const resource = plainAttributes(resourceSpans.resource?.attributes)
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        spans.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? '',
          name: span.name,
          kind: KINDS[span.kind] ?? 'UNSPECIFIED',
          attributes: plainAttributes(span.attributes),
          links: (span.links ?? []).map((link) => ({ traceId: link.traceId, spanId: link.spanId })),
          statusCode: span.status?.code ?? 0,
          resource
        })
      }
    }
  }
  return spans
}

async function launchOtlpReceiver(mode: ReceiverMode): Promise<OtlpReceiver> {
  const sockets = new Set<Socket>()
  const receiver: OtlpReceiver = { endpoint: '', spans: [], bodies: [], requests: [], held: 0, mode, close: async () => undefined }
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const body = Buffer.concat(chunks)
      const contentType = request.headers['content-type']
      receiver.bodies.push(body)
      receiver.requests.push({ contentType, headers: request.headers })
      const current = receiver.mode
      if (current.kind === 'hang') {
        receiver.held++
        return
      }
      if (current.kind === 'refuse') {
        response.writeHead(current.status, { 'content-type': 'text/plain' }).end('refused')
        return
      }
      const json = contentType?.startsWith('application/json') === true
      receiver.spans.push(...spansOf(json ? (JSON.parse(body.toString('utf8')) as OtlpRequest) : decodeProtobuf(body)))
      // An empty ExportTraceServiceResponse: full success.
      if (json) response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      else response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
    })
  })
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  receiver.endpoint = `${await listenOnLoopback(server)}/v1/traces`
  receiver.close = once(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
  return receiver
}

/** An OTLP/HTTP collector on loopback for every test of the enclosing describe. */
export function useOtlpReceiver(mode: ReceiverMode = { kind: 'accept' }): OtlpReceiver {
  return ownedBySuite('useOtlpReceiver', () => launchOtlpReceiver(mode), (receiver) => receiver.close())
}

/** An OTLP/HTTP collector on loopback for the running test. */
export function startOtlpReceiver(mode: ReceiverMode = { kind: 'accept' }): Promise<OtlpReceiver> {
  return ownedByTest('startOtlpReceiver', () => launchOtlpReceiver(mode), (receiver) => receiver.close())
}
