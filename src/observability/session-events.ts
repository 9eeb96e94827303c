/**
 * The words logs and metrics use for the session map (SPEC 9). They are defined here, below
 * sessions/, so that what reports a session event never depends on what produces it.
 */

/** Session-map outcomes as they appear in logs and metrics (SPEC 9). */
export type SessionOutcome = 'hit' | 'miss' | 'coalesced' | 'stale-retry'

/** What `/readyz` and the metrics say about the session store: its kind and, for a shared one, its reachability. */
export interface SessionStoreStatus {
  readonly kind: string
  readonly redis?: 'up' | 'down'
}
