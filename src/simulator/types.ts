import type { FastifyInstance } from 'fastify'

/** Who a session token or service key stands for. */
export interface SimulatorIdentity {
  subject: string
  roles: string[]
}

/** The governance context (contract part 2): every field optional, as a caller gives it. */
export interface GovernanceDefaults {
  policy?: string
  route?: string
  risk?: string
}

/** What applied to an execution once per-call, session and backend values are combined. */
export interface EffectiveContext {
  policy: string
  route: string
  risk: string
}

export interface SimulatorOptions {
  /** Opaque bearer session tokens -> identity. */
  sessionTokens?: Record<string, SimulatorIdentity>
  /** `key_*` service-account token secrets -> identity (subject like `sa_...`). */
  serviceKeys?: Record<string, SimulatorIdentity>
  backendDefaults?: EffectiveContext
  /** Sessions older than this answer 410 SESSION_EXPIRED. */
  sessionTtlMs?: number
  logger?: boolean
  /**
   * Keep every request in `calls` (headers and body) for tests to read. The gateway's embedded
   * simulator turns it off: a long-running process would keep every request it ever served.
   */
  recordCalls?: boolean
  /**
   * Serve the unauthenticated `/_simulator/*` controls (revoke a key, expire a session) for tests
   * that run the simulator in another process. The gateway's embedded simulator turns them off:
   * with `fallback: proxy` any client could reach them through the gateway.
   */
  controlRoutes?: boolean
}

export interface SimulatorCall {
  method: string
  /** The request target without its query string. */
  path: string
  /** The request target as received, query included. */
  url: string
  headers: Record<string, string | string[] | undefined>
  /** Parsed JSON body; the raw text when it was not JSON; undefined when there was none. */
  body: unknown
}

export interface Simulator {
  /** Built, not listening: `app.inject()` works without a socket. */
  readonly app: FastifyInstance
  /** Resolves with the base URL, e.g. `http://127.0.0.1:54321`. */
  listen(opts?: { host?: string; port?: number }): Promise<string>
  /** Every request received, in order, recorded before any auth decision. */
  readonly calls: SimulatorCall[]
  countCalls(method: string, path: string | RegExp): number
  resetCalls(): void
  revokeKey(key: string): void
  expireSession(sessionId: string): void
  /** Sessions started so far, expired ones included (they still answer 410). */
  sessionCount(): number
  close(): Promise<void>
}
