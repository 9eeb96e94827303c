import { SimulatorError } from './errors.js'
import { newId } from './meta.js'
import type { GovernanceDefaults } from './types.js'

export interface SimulatorSession {
  readonly id: string
  /** Sessions belong to the subject of the token that started them. */
  readonly ownerSubject: string
  readonly defaults: Readonly<GovernanceDefaults>
  /** Executions of one session share a lineage. */
  readonly lineageId: string
  readonly createdAtMs: number
  expired: boolean
}

/** Sessions and their persisted defaults (contract part 2). */
export class SessionStore {
  readonly #sessions = new Map<string, SimulatorSession>()
  readonly #ttlMs: number

  constructor (ttlMs: number) {
    this.#ttlMs = ttlMs
  }

  start (ownerSubject: string, defaults: GovernanceDefaults): SimulatorSession {
    const session: SimulatorSession = {
      id: newId('ses'),
      ownerSubject,
      defaults: Object.freeze({ ...defaults }),
      lineageId: newId('lin'),
      createdAtMs: Date.now(),
      expired: false
    }
    this.#sessions.set(session.id, session)
    return session
  }

  /**
   * The session `subject` may execute in. Ownership is checked before expiry so that another
   * identity's session answers exactly like one that does not exist.
   */
  resolveForExecution (sessionId: string, subject: string): SimulatorSession {
    const session = this.#sessions.get(sessionId)
    if (session === undefined || session.ownerSubject !== subject) {
      throw new SimulatorError('SESSION_NOT_FOUND', 'session not found')
    }
    if (session.expired || Date.now() - session.createdAtMs > this.#ttlMs) {
      throw new SimulatorError('SESSION_EXPIRED', 'session has expired; start a new one')
    }
    return session
  }

  /** Unknown ids are ignored: expiring is idempotent. */
  expire (sessionId: string): void {
    const session = this.#sessions.get(sessionId)
    if (session !== undefined) session.expired = true
  }

  get size (): number {
    return this.#sessions.size
  }
}
