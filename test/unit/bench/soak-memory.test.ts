import { describe, expect, it } from 'vitest'
// @ts-expect-error -- a plain .mjs script of the benchmark, without types
import * as soakMemory from '../../../bench/soak-memory.mjs'

interface Sample {
  t: number
  value: number
}
interface Verdict {
  majorGcs: number
  firstMajorGcAt: number | null
  heapFloorsMiB: { gcAt: number; floorMiB: number }[]
  rssAfterFirstGc: { level: boolean } | null
  heapFloor: { earlierHalfLowestMiB: number; laterHalfLowestMiB: number; level: boolean } | null
  plateau: boolean | null
  notJudged: string | null
}
const { parseMemoryMetrics, majorGcTimes, heapFloors, perMinute, judgeMemory } = soakMemory as {
  parseMemoryMetrics: (text: string) => { heapUsedBytes: number | null; oldSpaceUsedBytes: number | null; majorGcs: number | null }
  majorGcTimes: (samples: { t: number; count: number }[]) => number[]
  heapFloors: (heap: Sample[], gcTimes: number[]) => { gcAt: number; floor: number }[]
  perMinute: (times: number[], seconds: number) => number[]
  judgeMemory: (life: { rss: Sample[]; heap: Sample[]; gcs: { t: number; count: number }[]; end: number }) => Verdict
}

const MIB = 2 ** 20

/**
 * A life of `seconds` sampled each second: the heap fills from `floor(t)` by `fillPerSecond` MiB
 * until a major GC every `gcEvery` s (from `firstGcAt`) drops it back to the floor; RSS follows
 * the heap plus 60 MiB, never below what it reached (as RSS does not give back the heap's pages).
 */
function life({ seconds, firstGcAt, gcEvery, floor, fillPerSecond = 0.5 }: { seconds: number; firstGcAt: number; gcEvery: number; floor: (t: number) => number; fillPerSecond?: number }) {
  const rss: Sample[] = []
  const heap: Sample[] = []
  const gcs: { t: number; count: number }[] = []
  let count = 0
  let heapMiB = floor(0)
  let rssMiB = 0
  for (let t = 1; t <= seconds; t++) {
    if (t >= firstGcAt && (t - firstGcAt) % gcEvery === 0) {
      count++
      heapMiB = floor(t)
    } else heapMiB += fillPerSecond
    rssMiB = Math.max(rssMiB, heapMiB + 60)
    heap.push({ t, value: heapMiB * MIB })
    rss.push({ t, value: rssMiB * MIB })
    gcs.push({ t, count })
  }
  return { rss, heap, gcs, end: seconds }
}

/*
 * The soak's memory verdict (docs/soak.md): taken only once major GCs have started, since with
 * --initial-old-space-size=128 the heap fills before the first one; then RSS must level off and
 * the heap's floor after each major GC must not grow.
 */
describe('bench/soak-memory.mjs', () => {
  it('reads heap used, the old space and the count of major GCs from the gateway\'s /metrics', () => {
    const text = [
      '# HELP v4gw_nodejs_heap_size_used_bytes Process heap size used from Node.js in bytes.',
      'v4gw_nodejs_heap_size_used_bytes 53595760',
      'v4gw_nodejs_heap_space_size_used_bytes{space="new"} 1000',
      'v4gw_nodejs_heap_space_size_used_bytes{space="old"} 33355616',
      'v4gw_nodejs_gc_duration_seconds_count{kind="minor"} 20',
      'v4gw_nodejs_gc_duration_seconds_count{kind="major"} 3'
    ].join('\n')
    expect(parseMemoryMetrics(text)).toEqual({ heapUsedBytes: 53595760, oldSpaceUsedBytes: 33355616, majorGcs: 3 })
    // Before its first major GC prom-client has no series of that kind: zero, not unknown.
    expect(parseMemoryMetrics(text.replace(/^.*kind="major".*$/m, '')).majorGcs).toBe(0)
    expect(parseMemoryMetrics('')).toEqual({ heapUsedBytes: null, oldSpaceUsedBytes: null, majorGcs: null })
  })

  it('places each major GC at the sample that counted it, and takes the least heap up to the next as its floor', () => {
    const gcs = [
      { t: 1, count: 2 },
      { t: 2, count: 2 },
      { t: 3, count: 3 },
      { t: 4, count: 3 },
      { t: 5, count: 5 },
      { t: 6, count: 5 }
    ]
    // The two GCs of start-up are not placed; two between samples are placed twice.
    expect(majorGcTimes(gcs)).toEqual([3, 5, 5])
    const heap = [10, 20, 12, 15, 9, 11].map((value, index) => ({ t: index + 1, value }))
    expect(heapFloors(heap, [3, 5, 5])).toEqual([
      { gcAt: 3, floor: 12 },
      { gcAt: 5, floor: 9 }
    ])
    expect(perMinute([3, 5, 61, 130], 150)).toEqual([2, 1, 1])
  })

  it('does not judge a heap that is still filling', () => {
    const verdict = judgeMemory(life({ seconds: 400, firstGcAt: 1000, gcEvery: 20, floor: () => 40 }))
    expect(verdict.plateau).toBeNull()
    expect(verdict.majorGcs).toBe(0)
    expect(verdict.notJudged).toMatch(/no major GC in 400 s/)
  })

  it('passes a sawtooth whose floor stays level, and fails one whose floor climbs', () => {
    const level = judgeMemory(life({ seconds: 420, firstGcAt: 100, gcEvery: 20, floor: () => 40 }))
    expect(level.majorGcs).toBe(17)
    expect(level.heapFloorsMiB.every(({ floorMiB }) => floorMiB === 40)).toBe(true)
    expect(level.rssAfterFirstGc?.level).toBe(true)
    expect(level.plateau).toBe(true)

    // A cycle whose samples all missed its low point reads high; that alone is not growth.
    const missed = life({ seconds: 420, firstGcAt: 100, gcEvery: 20, floor: () => 40 })
    for (const sample of missed.heap) if (sample.t >= 380 && sample.t < 400) sample.value += 30 * MIB
    expect(judgeMemory(missed).heapFloor?.level).toBe(true)

    // 3 MiB a minute kept: RSS climbs with it, and so does every floor.
    const leaking = judgeMemory(life({ seconds: 420, firstGcAt: 100, gcEvery: 20, floor: (t) => 40 + (3 * t) / 60 }))
    expect(leaking.heapFloor?.level).toBe(false)
    expect(leaking.heapFloor!.laterHalfLowestMiB - leaking.heapFloor!.earlierHalfLowestMiB).toBeGreaterThan(7)
    expect(leaking.plateau).toBe(false)
  })
})
