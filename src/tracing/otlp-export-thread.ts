import { ExportResultCode } from '@opentelemetry/core'
import { CompressionAlgorithm } from '@opentelemetry/otlp-exporter-base'
import { convertLegacyHttpOptions, createOtlpHttpExportDelegate } from '@opentelemetry/otlp-exporter-base/node-http'
import { JsonTraceSerializer, ProtobufTraceSerializer, type IExportTraceServiceResponse, type ISerializer } from '@opentelemetry/otlp-transformer'
import { parentPort, workerData } from 'node:worker_threads'
import type { EncodedBatch, ExportThreadSettings, FromExportThread, ToExportThread } from './thread-exporter.js'

/*
 * The export thread (thread-exporter.ts): OTLP/HTTP as `@opentelemetry/otlp-exporter-base` sends
 * it (its transport, retries, timeout and export queue), for batches the gateway's thread has
 * encoded already. Nothing of a request runs here, and nothing of the export runs there.
 */

const port = parentPort
if (port === null) throw new Error('otlp-export-thread.js runs as a worker thread of the gateway')
const settings = workerData as ExportThreadSettings
const json = settings.protocol === 'http/json'

const serializer: ISerializer<EncodedBatch, IExportTraceServiceResponse> = {
  serializeRequest: (batch) => batch.body,
  // The collector's answer is read as the library's own exporters read it (a partial success is logged by its diag logger).
  deserializeResponse: (bytes) => (json ? JsonTraceSerializer : ProtobufTraceSerializer).deserializeResponse(bytes)
}
const http = convertLegacyHttpOptions(
  // Compression set, so that no OTEL_EXPORTER_OTLP_COMPRESSION in the environment changes what is sent.
  { url: settings.url, headers: settings.headers, timeoutMillis: settings.timeoutMillis, compression: CompressionAlgorithm.NONE },
  'TRACES',
  'v1/traces',
  { 'Content-Type': json ? 'application/json' : 'application/x-protobuf' }
)
// No meter provider: the library's exporter self-metrics stay no-ops, as in its own exporters without one.
const delegate = createOtlpHttpExportDelegate(http, serializer, 'otlp_http_span_exporter', { name: 'span', countItems: (batch: EncodedBatch) => batch.spans }, undefined)

port.on('message', (message: ToExportThread) => {
  if (message.kind === 'export') {
    delegate.export(message.batch, (result) => send({ kind: 'exported', id: message.id, ok: result.code === ExportResultCode.SUCCESS }))
  } else {
    // Every export under way is answered first (the library's shutdown waits for them).
    void delegate.shutdown().then(() => send({ kind: 'shut' }))
  }
})

function send(message: FromExportThread): void {
  port?.postMessage(message)
}
