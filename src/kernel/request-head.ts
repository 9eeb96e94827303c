import type { IncomingHttpHeaders } from 'node:http'
import type { ConnectionMemo } from './connection-memo.js'

/**
 * A request's head as the planner reads it: what arrived, never changed after. The live listener
 * takes it from Node's request (exchange.ts); `explain` builds one from its input (plan/).
 */
export interface RequestHead {
  /** `performance.now()` at arrival: durations. */
  readonly startedAt: number
  /** Wall-clock time at arrival (ms since the epoch): what time-dependent decisions (SPEC 13) compare with. */
  readonly now: number
  /** SPEC 6: the client's valid `x-request-id`, else a new one (explain: a placeholder). */
  readonly requestId: string
  readonly method: string
  /** The request target as sent. */
  readonly url: string
  readonly httpVersion: string
  /** Node's joined view of the headers (`IncomingMessage#headers`). */
  readonly headers: IncomingHttpHeaders
  /** Every header line as sent, names as spelled: repeated credentials and Hosts are visible here. */
  readonly rawHeaders: readonly string[]
  readonly clientAddress: string | undefined
  readonly protocol: 'http' | 'https'
  /** The live listener's: what the request's connection remembers of its digests. `explain` has none, and hashes every time. */
  readonly memo?: ConnectionMemo | undefined
}
