import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createBodyStallWatch } from '../../../src/kernel/body-stall.js'
import type { Exchange } from '../../../src/kernel/exchange.js'

type Fake = ReturnType<typeof exchange>

/** An exchange as the watch reads one: its request's socket count and state. */
function exchange(name: string): Exchange & { name: string; request: { socket: { bytesRead: number; destroyed: boolean }; complete: boolean; readableLength: number } } {
  return {
    name,
    head: { startedAt: performance.now() },
    bodyWatchIndex: -1,
    bodyBytesSeen: 0,
    bodyProgressAt: 0,
    bodyStallLimitMs: 0,
    request: { socket: { bytesRead: 100, destroyed: false }, complete: false, readableLength: 0 }
  } as never
}

// SPEC 10: a body that stops arriving is cut (408) once the upstream limit passes without progress.
describe('the body-stall watch', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('cuts each request whose bytes stopped, once, and none that was unwatched, completed or progressing', () => {
    const stalled: string[] = []
    // A limit of 0: a sweep that sees no progress since the one before cuts.
    const watch = createBodyStallWatch(() => 0, (cut) => stalled.push((cut as ReturnType<typeof exchange>).name))
    const [a, b, c, d, e] = ['a', 'b', 'c', 'd', 'e'].map(exchange) as [Fake, Fake, Fake, Fake, Fake]
    for (const one of [a, b, c, d, e]) watch.watch(one as Exchange)
    // Watching twice keeps one entry.
    watch.watch(c as Exchange)
    watch.unwatch(b as Exchange)
    d.request.complete = true
    e.request.socket.bytesRead += 10
    vi.advanceTimersByTime(1_000)
    expect(stalled.sort()).toEqual(['a', 'c'])
    // Cut requests leave the watch; e is cut once it stops too.
    vi.advanceTimersByTime(1_000)
    expect(stalled.sort()).toEqual(['a', 'c', 'e'])
    vi.advanceTimersByTime(3_000)
    expect(stalled).toHaveLength(3)
    // Unwatched, an exchange can be watched again.
    watch.watch(b as Exchange)
    vi.advanceTimersByTime(1_000)
    expect(stalled.sort()).toEqual(['a', 'b', 'c', 'e'])
    watch.stop()
  })

  it('does not cut a body held in the gateway’s own buffer (back-pressure), and cuts it once that is read', () => {
    const stalled: string[] = []
    const watch = createBodyStallWatch(() => 0, (cut) => stalled.push((cut as ReturnType<typeof exchange>).name))
    const held = exchange('held')
    held.request.readableLength = 512
    watch.watch(held as Exchange)
    vi.advanceTimersByTime(5_000)
    expect(stalled).toEqual([])
    held.request.readableLength = 0
    vi.advanceTimersByTime(1_000)
    expect(stalled).toEqual(['held'])
    watch.stop()
  })

  it('keeps every other request watched when requests leave from any place, first, middle or last', () => {
    const stalled: string[] = []
    const watch = createBodyStallWatch(() => 0, (cut) => stalled.push((cut as Fake).name))
    const all = Array.from({ length: 9 }, (_, index) => exchange(`r${index}`))
    for (const one of all) watch.watch(one as Exchange)
    for (const leaving of [all[0], all[4], all[8], all[5]] as Fake[]) watch.unwatch(leaving as Exchange)
    // Leaving twice changes nothing.
    watch.unwatch(all[4] as Exchange)
    vi.advanceTimersByTime(1_000)
    expect(stalled.sort()).toEqual(['r1', 'r2', 'r3', 'r6', 'r7'])
    vi.advanceTimersByTime(3_000)
    expect(stalled).toHaveLength(5)
    watch.stop()
  })

  it('holds each request to the limit in force when it was watched: a reload meanwhile applies to new requests (SPEC 8)', () => {
    const stalled: string[] = []
    let limitMs = 30_000
    const watch = createBodyStallWatch(() => limitMs, (cut) => stalled.push((cut as Fake).name))
    const before = exchange('before')
    watch.watch(before as Exchange)
    limitMs = 2_000
    const after = exchange('after')
    watch.watch(after as Exchange)
    vi.advanceTimersByTime(5_000)
    expect(stalled).toEqual(['after'])
    vi.advanceTimersByTime(26_000)
    expect(stalled).toEqual(['after', 'before'])
    watch.stop()
  })

  it('cuts each stalled request once when a cut ends other watched requests during the same sweep', () => {
    const stalled: string[] = []
    const all = Array.from({ length: 6 }, (_, index) => exchange(`r${index}`))
    // A cut that ends two other requests on the way (as closing a shared upstream might).
    const watch = createBodyStallWatch(
      () => 0,
      (cut) => {
        stalled.push((cut as Fake).name)
        for (const other of all) if (other !== cut) watch.unwatch(other as Exchange)
      }
    )
    for (const one of all) watch.watch(one as Exchange)
    vi.advanceTimersByTime(1_000)
    expect(stalled).toHaveLength(1)
    vi.advanceTimersByTime(3_000)
    expect(stalled).toHaveLength(1)
    watch.stop()
  })
})
