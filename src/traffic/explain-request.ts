import { redactQueryCredential, removeQueryCredential, rewriteProxyCredentialHeaders } from '../credentials/index.js'
import { toGatewayError } from '../errors/error-handler.js'
import { GatewayError } from '../errors/registry.js'
import type { GatewayRuntime } from '../gateway-runtime.js'
import { authorizeRuntimeCall, parseRuntimeBody, readLegacyCredential } from '../legacy/prepare-legacy-call.js'
import { readStateKey, V4_EXECUTE_PATH, V4_SESSIONS_START_PATH } from '../legacy/run-legacy-call.js'
import { runtimeCallHeaders } from '../legacy/runtime-call-headers.js'
import { toJsonBody } from '../legacy/to-json-body.js'
import { translateExecute, translateSessionDefaults, translateSessionExecute } from '../legacy/translate.js'
import { REDACTED_HEADERS } from '../observability/logger.js'
import { isValidRequestId } from '../observability/request-id.js'
import { passthroughHeaders } from '../passthrough/forward-stream.js'
import { classifyRequest, rewrittenProxyPath, type ClassificationNote } from './classify-request.js'

export interface ExplainInput {
  method: string
  /** Path and query, e.g. `/v1/runs/invoke?x=1`. */
  path: string
  headers?: Record<string, string>
  body?: unknown
  /** Shorthand for the tenancy header. */
  tenant?: string
}

export interface PlannedCall {
  method: string
  url: string
  headers: Record<string, string>
  body?: unknown
  when?: string
}

export interface Explanation {
  tenant?: string
  trafficClass?: string
  legacyRoute?: string
  action?: string
  /** The V4 calls the request would become, in order; credentials redacted. */
  calls: PlannedCall[]
  /** Set when the gateway would answer by itself, without any upstream call. */
  answer?: { status: number; code: string; message: string }
}

const REDACTED = new Set<string>(REDACTED_HEADERS)

/** Stand-ins for what only a live request has. */
const CLIENT_ADDRESS = '(client address)'
const NEW_REQUEST_ID = '(a new request id)'

function redactHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const result: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    if (!REDACTED.has(name)) result[name] = Array.isArray(value) ? value.join(', ') : value
    else result[name] = name === 'authorization' && /^bearer /i.test(String(value)) ? 'Bearer [redacted]' : '[redacted]'
  }
  return result
}

/**
 * The V4 call(s) a request would become (SPEC 9 `explain`), through the same classification
 * and preparation steps the traffic listener uses; sends nothing.
 */
export function explainRequest(runtime: GatewayRuntime, input: ExplainInput): Explanation {
  const method = input.method.toUpperCase()
  const headers: Record<string, string> = {}
  for (const [name, value] of Object.entries(input.headers ?? {})) headers[name.toLowerCase()] = value
  if (input.tenant !== undefined) headers[runtime.tenancy.header] = input.tenant
  // GET and HEAD bodies are never read, so never sent on (request-body.ts).
  const body = method === 'GET' || method === 'HEAD' ? undefined : input.body
  if (body !== undefined) headers['content-type'] ??= 'application/json'
  const incomingId = headers['x-request-id']
  const requestId = isValidRequestId(incomingId) ? incomingId : NEW_REQUEST_ID
  const note: ClassificationNote = {}
  const explanation: Explanation = { calls: [] }
  try {
    const classification = classifyRequest(runtime, { method, url: input.path, headers }, note)
    const { tenant, target } = classification
    const origin = tenant.upstreamOrigin
    const shownQuery = redactQueryCredential(target.rawQuery, runtime.config.credentials.queryParam)
    const query = shownQuery === '' ? '' : `?${shownQuery}`
    // The headers as the traffic listener builds them: hop-by-hop ones gone, x-forwarded-* added.
    const forwarded = passthroughHeaders(headers, CLIENT_ADDRESS, 'http', requestId)
    if (classification.trafficClass !== 'legacy') {
      explanation.calls.push({ method, url: `${origin}${target.pathname}${query}`, headers: redactHeaders(forwarded), body })
      return Object.assign(explanation, note, { trafficClass: classification.trafficClass })
    }
    const { route, params } = classification.match
    Object.assign(explanation, { legacyRoute: `${route.method} ${route.path}`, action: route.action })
    const proxyPath = route.action === 'proxy' ? rewrittenProxyPath(runtime, classification.match, note) : undefined
    const credentials = runtime.config.credentials
    const headersDistinct = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, [value]]))
    const credential = readLegacyCredential(headersDistinct, target.rawQuery, credentials)
    if (proxyPath !== undefined) {
      const rewrittenQuery = removeQueryCredential(target.rawQuery, credentials.queryParam)
      explanation.calls.push({
        method,
        url: `${origin}${proxyPath}${rewrittenQuery === '' ? '' : `?${rewrittenQuery}`}`,
        headers: redactHeaders(rewriteProxyCredentialHeaders(forwarded, credential)),
        body
      })
      return Object.assign(explanation, note, { trafficClass: 'legacy' })
    }
    const authorization = authorizeRuntimeCall(credential, headers['content-type'], headers['content-encoding'])
    // As the gateway would: a body nested too deeply to send is its 400, not a 500 here.
    const bytes = Buffer.from(toJsonBody(body ?? null))
    // The same limit the traffic listener reads a legacy body with (SPEC 10).
    if (bytes.length > runtime.config.limits.bodyBytes) throw new GatewayError('PAYLOAD_TOO_LARGE', `request body is larger than ${runtime.config.limits.bodyBytes} bytes`)
    const { body: parsed, call } = parseRuntimeBody(bytes, tenant, route)
    const v4Headers = redactHeaders(runtimeCallHeaders(headers, CLIENT_ADDRESS, 'http', requestId, authorization))
    if (route.action === 'execute') {
      explanation.calls.push({ method: 'POST', url: `${origin}${V4_EXECUTE_PATH}`, headers: v4Headers, body: translateExecute(call) })
    } else {
      const stateKey = readStateKey({ route, params, requestHeaders: headers, call, body: parsed })
      explanation.calls.push(
        { method: 'POST', url: `${origin}${V4_SESSIONS_START_PATH}`, headers: v4Headers, body: translateSessionDefaults(call), when: `only when the session map has no session for this identity, state key "${stateKey}" and these defaults` },
        { method: 'POST', url: `${origin}/v4/sessions/{sessionId}/executions.execute`, headers: v4Headers, body: translateSessionExecute(call) }
      )
    }
    return Object.assign(explanation, note, { trafficClass: 'legacy' })
  } catch (error) {
    const gatewayError = toGatewayError(error)
    return Object.assign(explanation, note, { answer: { status: gatewayError.statusCode, code: gatewayError.code, message: gatewayError.message } })
  }
}
