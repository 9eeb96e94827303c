import type { Server } from 'node:http'
import type { Duplex } from 'node:stream'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { closeServer, cutConnections } from '../kernel/traffic-server.js'
import type { SessionStore } from '../sessions/session-store.js'
import type { TrafficHandler } from '../traffic/traffic-handler.js'
import type { UpstreamClient } from '../upstream/upstream-client.js'

const done = (): true => true

/** How long `close` waits at most for the last responses to report their end. */
const SETTLE_GUARD_MS = 1_000

export interface ShutdownDeps {
  trafficServer: Server
  trafficHandler: Pick<TrafficHandler, 'settled' | 'stop' | 'abandonComparisons'>
  admin: FastifyInstance
  upstream: Pick<UpstreamClient, 'close' | 'destroy'>
  /** SPEC 15: the comparisons' pool, destroyed once they are abandoned: nothing waits for a V4 side. */
  shadowUpstream?: Pick<UpstreamClient, 'destroy'>
  sessionStore: SessionStore
  /** A store given by the caller stays the caller's to close. */
  ownsSessionStore: boolean
  /** SPEC 16: settles the idempotency claims of requests cut at the end of the grace period. */
  cutClaims?: () => Promise<void>
  /** SPEC 12's shared store, closed last: the session store may still use its connection. */
  store: { close(): Promise<void> }
  /** How long an idle kept-alive traffic connection may stay once closing starts (read at close). */
  idleCloseMs: () => number
  /** SPEC 17: the spans still queued are exported once the requests are done, within the grace period. */
  tracing?: { shutdown(): Promise<void>; abandon(): void } | undefined
  /** `shutdown.graceMs`, read at close: what is left of it bounds the last export. */
  graceMs?: () => number
}

export interface Shutdown {
  isDraining(): boolean
  /** Readiness goes false and new requests get 503 SHUTTING_DOWN; in-flight ones go on. */
  startDraining(): void
  /** Stops accepting, waits for in-flight requests, then releases everything; once. */
  close(): Promise<void>
  /** The end of the grace period: cuts what is still open so that `close` ends now. */
  cutRemaining(): void
}

/** Draining, closing and the cut at the end of the grace period (SPEC 9). */
export function createShutdown(deps: ShutdownDeps): Shutdown {
  const { trafficServer, trafficHandler, admin, upstream, sessionStore } = deps
  let draining = false
  let closing: Promise<void> | undefined
  // Settles when the grace period ends and the pool is destroyed: close() waits for the pool's
  // calls only until then (undici's close() may already be waiting when the cut comes).
  let cut = false
  let announceCut: () => void = () => undefined
  const cutCome = new Promise<void>((resolve) => {
    announceCut = resolve
  })
  let claimsCut: Promise<void> = Promise.resolve()
  /** Every request has ended, or the guard's time has passed. */
  const settledOrGuard = (): Promise<unknown> => Promise.race([trafficHandler.settled(), sleep(SETTLE_GUARD_MS, undefined, { ref: false })])

  return {
    isDraining: () => draining,
    startDraining() {
      draining = true
    },
    cutRemaining() {
      // A comparison whose legacy answer the cut ends is cut at shutdown (abandoned), not a legacy failure.
      trafficHandler.abandonComparisons()
      cutConnections(trafficServer)
      // An admin request still arriving (half its headers or body) is not idle, so fastify's
      // close would wait on it for as long as the client likes.
      admin.server.closeAllConnections()
      if (cut) return
      cut = true
      // Before the pool goes: a call it fails must not let its request delete a claim whose execution was sent.
      claimsCut = deps.cutClaims?.().catch(() => undefined) ?? Promise.resolve()
      // The admin listener accepts until fastify's close reaches server.close(): the grace is
      // spent, so a connection that comes in between is cut too.
      admin.server.on('connection', (socket: Duplex) => socket.destroy())
      void upstream.destroy().then(announceCut, announceCut)
    },
    close() {
      // Once: a signal and a caller may both ask, and the second must wait for the same end.
      closing ??= (async () => {
        const closeStartedAt = performance.now()
        draining = true
        await closeServer(trafficServer, deps.idleCloseMs())
        // Every connection has ended or been cut, so every response closes within a turn or two;
        // the bound is a guard, and the wait for a keyed request whose client left (SPEC 16: it
        // ends when its calls do), which the one below waits for.
        await settledOrGuard()
        trafficHandler.stop()
        void deps.shadowUpstream?.destroy().catch(() => undefined)
        await admin.close()
        await Promise.race([upstream.close().catch(() => undefined), cutCome])
        // The calls have ended or been cut: a keyed request that outlived its client keeps its
        // answer (a store round trip) and writes its line, span and counts, waited for up to the guard.
        await settledOrGuard()
        // Every request has ended, so has its span: the queue goes to the collector now, unless the
        // grace period ends first (a collector away or slow never holds the exit past it).
        if (deps.tracing !== undefined) {
          const graceLeftMs = Math.max(0, (deps.graceMs?.() ?? 0) - (performance.now() - closeStartedAt))
          const flushed = await Promise.race([deps.tracing.shutdown().then(done, done), cutCome.then(() => false), sleep(graceLeftMs, false, { ref: false })])
          // Past the grace period the export is let go: an embedder's close() returns now, and what
          // is still being sent must not hold its process up to the export's own timeout.
          if (!flushed) deps.tracing.abandon()
        }
        if (deps.ownsSessionStore) await sessionStore.close?.()
        // A keyed run whose client left and that still runs after the guards (waiting on another
        // replica's start, say) is one cut at shutdown too (SPEC 16): its claim is settled now,
        // while the store still answers, not left to its lease because the close came before the cut.
        if (!cut) claimsCut = deps.cutClaims?.().catch(() => undefined) ?? Promise.resolve()
        await claimsCut
        await deps.store.close()
      })()
      return closing
    }
  }
}
