import { setTimeout as sleep } from 'node:timers/promises'
import { afterEach, describe, expect, it } from 'vitest'
import { createEventLoopMonitor, type EventLoopMonitor } from '../../../src/kernel/load-shedding.js'

/** Holds the event loop for `ms`, as a second of synchronous start-up or a CPU-bound neighbour does. */
function blockLoop(ms: number): void {
  const end = Date.now() + ms
  while (Date.now() < end) {
    // spin
  }
}

/** Reads `isLate()` every 50 ms for `ms`: whether it was ever true. */
async function everLate(monitor: EventLoopMonitor, ms: number): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (monitor.isLate()) return true
    await sleep(50)
  }
  return false
}

// SPEC 10's limits.maxEventLoopDelayMs, sampled once a second.
describe('the event-loop monitor', () => {
  let monitor: EventLoopMonitor | undefined
  afterEach(() => monitor?.stop())

  it('reads nothing before start: a stall during start-up sheds no request after the ready line', async () => {
    monitor = createEventLoopMonitor(200)
    blockLoop(1_300)
    expect(await everLate(monitor, 2_200)).toBe(false)
  })

  it('reads a stall once started, then recovers by itself', async () => {
    monitor = createEventLoopMonitor(200)
    monitor.start()
    // At once: the sample is the interval's mean, and each calm 10-ms sample taken before the stall
    // would pull the 1.3-s one down towards the 200-ms limit (five of them: 215 ms).
    blockLoop(1_300)
    expect(await everLate(monitor, 2_200)).toBe(true)
    // A calm second after the stall's sample ends it.
    await sleep(2_200)
    expect(monitor.isLate()).toBe(false)
  })

  it('starts once: a second start keeps the sampler it has', async () => {
    monitor = createEventLoopMonitor(200)
    monitor.start()
    monitor.start()
    monitor.stop()
    blockLoop(1_300)
    // Stopped: no timer is left to read the stall (a second sampler from the second start would).
    expect(await everLate(monitor, 1_500)).toBe(false)
  })
})
