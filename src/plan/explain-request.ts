import { redactQueryCredential } from '../credentials/index.js'
import { GatewayError, toGatewayError } from '../errors/registry.js'
import { refuseHead } from '../kernel/head-checks.js'
import { hasBody } from '../kernel/request-body.js'
import type { RequestHead } from '../kernel/request-head.js'
import type { V4Call } from '../legacy/legacy-calls.js'
import { toJsonBody } from '../legacy/to-json-body.js'
import { REDACTED_HEADERS } from '../observability/logger.js'
import { isValidRequestId } from '../observability/request-id.js'
import type { IdempotencyRecord } from '../sessions/idempotency-store.js'
import type { GatewayRuntime } from '../tenancy/gateway-runtime.js'
import { headersFromRaw } from './head-from-input.js'
import type { DeprecationFacts } from './deprecation-step.js'
import type { MigrationFacts } from './migration-step.js'
import type { IdempotencyRequest } from './idempotency-step.js'
import { planRefusal, planRequest, type Plan, type PlanFacts } from './plan-request.js'
import { asReceivedHeaderValue } from '../util/header-value-bytes.js'

export interface ExplainInput {
  method: string
  /** Path and query, e.g. `/v1/runs/invoke?x=1`. */
  path: string
  /** A list for a header sent more than once, in the order sent. */
  headers?: Record<string, string | readonly string[]>
  /** The body as a JSON value, sent as its JSON text. */
  body?: unknown
  /** The body's bytes as text, sent as they are (wins over `body`). */
  rawBody?: string
  /** Shorthand for the tenancy header. */
  tenant?: string
  /** The instant to plan at (ISO 8601), for a brownout window or a sunset ahead (SPEC 13); now by default. */
  at?: string
  /** SPEC 14: decide for this client id (SPEC 12) rather than the one the request's credential or header gives. */
  client?: string
}

export interface ExplainedCall {
  method: string
  url: string
  headers: Record<string, string>
  body?: unknown
  when?: string
}

export interface Explanation {
  /** SPEC 9's shape has both: null when the request names no tenant the gateway knows, or none at all. */
  tenant: string | null
  trafficClass: string | null
  legacyRoute?: string
  /** SPEC 12's client id, from the tenant's `clients.key`. */
  clientId?: string
  action?: string
  /** SPEC 13 on a deprecated route: the client id, what was decided and why. */
  deprecation?: DeprecationFacts
  /**
   * SPEC 14 on a legacy route: the effective stage and its source, the side that would serve the
   * request (`legacy`, `v4`, or `none` for a retired route) and why: the canary's bucket or lists,
   * an exemption. `calls` then holds the call to the legacy upstream for the legacy side.
   */
  migration?: MigrationFacts
  /** SPEC 14's `x-v4gw-served-by` of the answer, on a tenant that uses stages. */
  servedBy?: string
  /**
   * SPEC 16 on a request that carries an idempotency key: its calls run once per key; a retry of
   * the same request gets the stored answer, another request with the key 422. With a record
   * store to read (`POST /admin/explain`), `record` and `would` say what the key holds now and
   * what this request would therefore get; the look claims nothing.
   */
  idempotency?: ExplainedIdempotency
  /** The V4 calls the request would become, in order; credentials redacted. */
  calls: ExplainedCall[]
  /** Set when the gateway would answer by itself, without any upstream call. */
  answer?: { status: number; code: string; message: string }
}

export interface ExplainedIdempotency {
  keyHeader: string
  ttlMs: number
  when: string
  /**
   * What the key holds now: no record, a call under way, this request's answer, this request's
   * answer too large to keep, another request's record; `unknown` when the store did not answer.
   */
  record?: 'none' | 'running' | 'answer' | 'too-large' | 'other-request' | 'unknown'
  /** What this request would get: executed, replayed, a wait for the running call (then a replay or 409), or a refusal (409 too large, 422 reused). */
  would?: 'execute' | 'replay' | 'wait' | 'refuse' | 'unknown'
}

/** SPEC 16's records as explain reads them: a look, never a claim. */
export interface IdempotencyRecordReader {
  peek(key: string): IdempotencyRecord | undefined | Promise<IdempotencyRecord | undefined>
}

const REDACTED = new Set<string>(REDACTED_HEADERS)

/** Stand-ins for what only a live request has. */
const CLIENT_ADDRESS = '(client address)'
const NEW_REQUEST_ID = '(a new request id)'
const SESSION_ID = '{sessionId}'

/**
 * The V4 call(s) a request would become (SPEC 9 `explain`): the plan the traffic listener would
 * run for it (plan-request.ts), printed with credentials redacted; sends nothing.
 */
export function explainRequest(runtime: GatewayRuntime, input: ExplainInput): Explanation {
  return explainPlan(runtime, input).explanation
}

/**
 * `explainRequest`, and for a keyed request what its key holds now in `records` (the running
 * gateway's, SPEC 16): whether it would be executed or replayed. Read only: the look claims nothing.
 */
export async function explainRequestWithRecords(runtime: GatewayRuntime, input: ExplainInput, records: IdempotencyRecordReader): Promise<Explanation> {
  const { explanation, keyed } = explainPlan(runtime, input)
  if (keyed === undefined || explanation.idempotency === undefined) return explanation
  let record: IdempotencyRecord | undefined
  try {
    record = await records.peek(keyed.recordKey)
  } catch {
    explanation.idempotency.record = 'unknown'
    explanation.idempotency.would = 'unknown'
    return explanation
  }
  const described = describeRecord(record, keyed.fingerprint)
  Object.assign(explanation.idempotency, described)
  // What the record decides is what the listener does: a replay or a refusal sends nothing.
  if (described.would === 'replay') explanation.calls = []
  if (described.record === 'other-request') return withAnswer(explanation, new GatewayError('IDEMPOTENCY_KEY_REUSED', `this ${keyed.settings.keyHeader} was sent before with a different request; send a new key for a new request`))
  if (described.record === 'too-large') return withAnswer(explanation, new GatewayError('IDEMPOTENCY_RESULT_TOO_LARGE', `the answer to this ${keyed.settings.keyHeader} was too large to keep; it is not executed again`))
  return explanation
}

function describeRecord(record: IdempotencyRecord | undefined, fingerprint: string): Pick<ExplainedIdempotency, 'record' | 'would'> {
  if (record === undefined) return { record: 'none', would: 'execute' }
  if (record.fingerprint !== fingerprint) return { record: 'other-request', would: 'refuse' }
  if (record.state === 'running') return { record: 'running', would: 'wait' }
  return record.answer === null ? { record: 'too-large', would: 'refuse' } : { record: 'answer', would: 'replay' }
}

function explainPlan(runtime: GatewayRuntime, input: ExplainInput): { explanation: Explanation; keyed?: IdempotencyRequest } {
  let keyed: IdempotencyRequest | undefined
  const explanation = explainInto(runtime, input, (request) => {
    keyed = request
  })
  return { explanation, keyed }
}

function explainInto(runtime: GatewayRuntime, input: ExplainInput, onKeyed: (request: IdempotencyRequest) => void): Explanation {
  const head = headFromInput(runtime, input)
  const bytes = bodyBytes(input, head)
  const explanation: Explanation = { tenant: null, trafficClass: null, calls: [] }
  try {
    // What the kernel refuses before anything is planned (a second Host, a transfer coding),
    // planned as the kernel plans it: the refusal with the facts of the route it names (SPEC 14).
    const refusal = refuseHead(head)
    let plan: Plan = refusal !== undefined ? planRefusal(runtime, head, refusal, input.client) : planRequest(runtime, head, { clientId: input.client })
    if (plan.kind === 'read-body') {
      // As the listener: a body nested too deeply to send is the client's 400, not a 500 here.
      plan = plan.withBody(bytes === undefined ? Buffer.alloc(0) : Buffer.from(bytes()))
    }
    Object.assign(explanation, shownFacts(plan.facts))
    const servedBy = plan.answerHeaders['x-v4gw-served-by']
    if (servedBy !== undefined) explanation.servedBy = servedBy
    if (plan.kind === 'idempotent') {
      onKeyed(plan.idempotency)
      const { settings } = plan.idempotency
      explanation.idempotency = {
        keyHeader: settings.keyHeader,
        ttlMs: settings.ttlMs,
        when: `executed when the key holds no answer; replayed (idempotent-replayed: true, nothing sent) when it holds this request's answer; 422 IDEMPOTENCY_KEY_REUSED when it holds another request's`
      }
      plan = plan.calls
    }
    switch (plan.kind) {
      case 'refuse':
        return withAnswer(explanation, plan.error)
      case 'stream': {
        const call = plan.call
        const url = `${call.origin}${withShownQuery(runtime, call.target)}`
        explanation.calls.push({ method: call.method, url, headers: redactHeaders(call.headers), body: bytes === undefined ? undefined : shownBody(input) })
        return explanation
      }
      case 'calls': {
        const calls = plan.calls
        const show = (call: V4Call, when?: string): ExplainedCall => ({
          method: call.method,
          url: `${plan.origin}${call.path}`,
          headers: redactHeaders(call.headers),
          body: JSON.parse(call.body) as unknown,
          ...(when === undefined ? {} : { when })
        })
        if (calls.action === 'execute') explanation.calls.push(show(calls.execution))
        else {
          const execution = show(calls.execution(SESSION_ID))
          execution.url = execution.url.replace(encodeURIComponent(SESSION_ID), SESSION_ID)
          explanation.calls.push(show(calls.start(), `only when the session map has no session for this identity, state key "${calls.stateKey}" and these defaults`), execution)
        }
        return explanation
      }
    }
  } catch (error) {
    return withAnswer(explanation, toGatewayError(error))
  }
}

/**
 * The request head the listener would see. Without a Host the request is read as HTTP/1.0, the
 * one version that may omit it (RFC 9112 3.2): explain then resolves the tenant as the listener
 * does for such a request.
 */
function headFromInput(runtime: GatewayRuntime, input: ExplainInput): RequestHead {
  const method = input.method.toUpperCase()
  const rawHeaders: string[] = []
  const tenancyHeader = runtime.tenancy.header
  // Header values are text here; the listener holds a value sent as UTF-8 as its bytes, so each is
  // made what the live request's is: its client id (SPEC 12) and forwarded bytes are the same.
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    if (input.tenant !== undefined && name.toLowerCase() === tenancyHeader) continue
    for (const one of typeof value === 'string' ? [value] : value) rawHeaders.push(name, asReceivedHeaderValue(one))
  }
  if (input.tenant !== undefined) rawHeaders.push(tenancyHeader, asReceivedHeaderValue(input.tenant))
  // A body is sent as JSON unless said otherwise; GET and HEAD bodies are never sent (request-body.ts).
  const sendsBody = (input.rawBody !== undefined || input.body !== undefined) && method !== 'GET' && method !== 'HEAD'
  if (sendsBody && !rawHeaders.some((name, index) => index % 2 === 0 && name.toLowerCase() === 'content-type')) rawHeaders.push('content-type', 'application/json')
  const headers = headersFromRaw(rawHeaders)
  const incomingId = headers['x-request-id']
  return {
    startedAt: 0,
    now: input.at === undefined ? Date.now() : Date.parse(input.at),
    requestId: typeof incomingId === 'string' && isValidRequestId(incomingId) ? incomingId : NEW_REQUEST_ID,
    method,
    url: input.path,
    httpVersion: headers.host === undefined ? '1.0' : '1.1',
    headers,
    rawHeaders,
    clientAddress: CLIENT_ADDRESS,
    protocol: 'http'
  }
}

/** The body's bytes when the listener would read one (GET and HEAD bodies never are), made on demand. */
function bodyBytes(input: ExplainInput, head: RequestHead): (() => string) | undefined {
  if ((input.rawBody === undefined && input.body === undefined) || !hasBody(head.method, head.headers)) return undefined
  return input.rawBody !== undefined ? () => input.rawBody as string : () => toJsonBody(input.body ?? null)
}

/**
 * The body as the explanation shows it: parsed when it is JSON, else its text. One nested deeper
 * than JSON.stringify can go (JSON.parse reads any depth) is streamed unchanged all the same
 * (SPEC 7), but cannot be printed parsed: its text, or a note when it came parsed.
 */
function shownBody(input: ExplainInput): unknown {
  if (input.rawBody === undefined) return printable(input.body) ? input.body : NOT_PRINTABLE
  try {
    const parsed = JSON.parse(input.rawBody) as unknown
    return printable(parsed) ? parsed : input.rawBody
  } catch {
    return input.rawBody
  }
}

const NOT_PRINTABLE = '(a JSON body nested too deeply to print; sent as it came)'

function printable(value: unknown): boolean {
  try {
    JSON.stringify(value)
    return true
  } catch (error) {
    if (error instanceof RangeError) return false
    throw error
  }
}

function shownFacts(facts: Readonly<PlanFacts>): Partial<Explanation> {
  const shown: Partial<Explanation> = {}
  if (facts.tenant !== undefined) shown.tenant = facts.tenant
  if (facts.trafficClass !== undefined) shown.trafficClass = facts.trafficClass
  if (facts.legacyRoute !== undefined) shown.legacyRoute = facts.legacyRoute
  if (facts.action !== undefined) shown.action = facts.action
  if (facts.clientId !== undefined) shown.clientId = facts.clientId
  if (facts.deprecation !== undefined) shown.deprecation = { ...facts.deprecation }
  if (facts.migration !== undefined) shown.migration = { ...facts.migration }
  return shown
}

function withAnswer(explanation: Explanation, error: GatewayError): Explanation {
  explanation.calls = []
  explanation.answer = { status: error.statusCode, code: error.code, message: error.message }
  return explanation
}

function withShownQuery(runtime: GatewayRuntime, target: string): string {
  const queryStart = target.indexOf('?')
  if (queryStart === -1) return target
  const shown = redactQueryCredential(target.slice(queryStart + 1), runtime.config.credentials.queryParam)
  return shown === '' ? target.slice(0, queryStart) : `${target.slice(0, queryStart)}?${shown}`
}

function redactHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const result: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    // A credential header spelled with underscores (`x_api_key`) is one too, to a proxy that reads it so.
    if (!REDACTED.has(name.toLowerCase().replaceAll('_', '-'))) result[name] = Array.isArray(value) ? value.join(', ') : value
    else result[name] = name === 'authorization' && /^bearer /i.test(String(value)) ? 'Bearer [redacted]' : '[redacted]'
  }
  return result
}
