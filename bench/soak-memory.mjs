// The soak's memory verdict (docs/soak.md): whether a gateway's memory levelled off, told apart
// from a heap that is still filling. V8 collects the old space only in a major (full) GC, and with
// the production flag `--initial-old-space-size=128` the first one comes only when the old space
// nears 128 MiB: until then garbage promoted out of the young generation piles up, the heap grows
// and RSS with it, and none of that is kept memory. So the verdict is taken only once major GCs
// have started, on two things:
//
//  - RSS levels off: over the part of the life after the first major GC, the median RSS of its
//    last third is at most max(5 %, 8 MiB) above the median of its middle third;
//  - the heap floor does not grow: the floor of a major GC is the least heap used sampled from it
//    to the next one (what the GC left, plus the young generation's live objects at that moment);
//    the lowest floor of the later half of the GCs is at most max(5 %, 4 MiB) above the lowest
//    floor of the earlier half. The lowest, not the median: sampled once a second, a cycle of a
//    few seconds often has no sample near its low point, so a single floor can read tens of MiB
//    high (the young generation, promotion since the GC), never low; kept memory raises them all.
//
// Neither is judged with fewer than MIN_MAJOR_GCS major GCs or less than PLATEAU_MIN_SECONDS
// after the first: the soak then says the heap was still filling, not that memory levelled off.

export const MIN_MAJOR_GCS = 4
export const PLATEAU_MIN_SECONDS = 120
export const RSS_TOLERANCE_MIB = (middleMiB) => Math.max(middleMiB * 0.05, 8)
export const FLOOR_TOLERANCE_MIB = (earlierMiB) => Math.max(earlierMiB * 0.05, 4)

const MIB = 2 ** 20

/**
 * The values the soak samples from a gateway's admin /metrics (prom-client's default metrics,
 * prefixed `v4gw_`): heap used, the old space's used bytes, and the count of major GCs. A value
 * the text does not hold is null.
 * @param {string} text the Prometheus text exposition
 * @returns {{ heapUsedBytes: number | null, oldSpaceUsedBytes: number | null, majorGcs: number | null }}
 */
export function parseMemoryMetrics(text) {
  const value = (pattern) => {
    const match = pattern.exec(text)
    return match === null ? null : Number(match[1])
  }
  return {
    heapUsedBytes: value(/^v4gw_nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\S+)/m),
    oldSpaceUsedBytes: value(/^v4gw_nodejs_heap_space_size_used_bytes\{[^}]*space="old"[^}]*\} (\S+)/m),
    // No major GC yet: prom-client has no series for the kind until its first one.
    majorGcs: value(/^v4gw_nodejs_gc_duration_seconds_count\{[^}]*kind="major"[^}]*\} (\S+)/m) ?? (/^v4gw_nodejs_heap_size_used_bytes/m.test(text) ? 0 : null)
  }
}

/**
 * When major GCs happened: the time of each sample whose count is above the one before, once per
 * GC counted (two GCs between samples give that time twice).
 * @param {{ t: number, count: number }[]} gcSamples in time order
 * @returns {number[]}
 */
export function majorGcTimes(gcSamples) {
  const times = []
  let previous = gcSamples[0]?.count ?? 0
  // A process's first sample may already count GCs made during start-up: those are not placed.
  for (const { t, count } of gcSamples.slice(1)) {
    for (let gc = previous; gc < count; gc++) times.push(t)
    previous = Math.max(previous, count)
  }
  return times
}

/**
 * The heap floor after each major GC: the least heap used sampled from the GC's sample up to the
 * next GC's (or the end of the samples).
 * @param {{ t: number, value: number }[]} heapSamples heap used, in time order
 * @param {number[]} gcTimes from majorGcTimes
 * @returns {{ gcAt: number, floor: number }[]} in the unit of the samples
 */
export function heapFloors(heapSamples, gcTimes) {
  const starts = [...new Set(gcTimes)]
  const floors = []
  for (const [index, gcAt] of starts.entries()) {
    const until = starts[index + 1] ?? Number.POSITIVE_INFINITY
    const cycle = heapSamples.filter(({ t }) => t >= gcAt && t < until)
    if (cycle.length > 0) floors.push({ gcAt, floor: Math.min(...cycle.map(({ value }) => value)) })
  }
  return floors
}

/** Major GCs in each minute from 0 to `seconds`. */
export function perMinute(times, seconds) {
  const counts = Array.from({ length: Math.max(1, Math.ceil(seconds / 60)) }, () => 0)
  for (const t of times) counts[Math.min(counts.length - 1, Math.floor(t / 60))]++
  return counts
}

/**
 * The memory verdict of one process's life (see the top of this file).
 * @param {object} life
 * @param {{ t: number, value: number }[]} life.rss RSS in bytes
 * @param {{ t: number, value: number }[]} life.heap heap used in bytes
 * @param {{ t: number, value: number }[]} [life.oldSpace] old space used in bytes (reported, not judged)
 * @param {{ t: number, count: number }[]} life.gcs count of major GCs
 * @param {number} life.end when the life ended (s)
 */
export function judgeMemory({ rss, heap, oldSpace = [], gcs, end }) {
  const gcTimes = majorGcTimes(gcs)
  const floors = heapFloors(heap, gcTimes).map(({ gcAt, floor }) => ({ gcAt: round(gcAt), floorMiB: round(floor / MIB) }))
  const firstGcAt = gcTimes[0] ?? null
  const verdict = {
    majorGcs: gcTimes.length,
    firstMajorGcAt: firstGcAt === null ? null : round(firstGcAt),
    heapFloorsMiB: floors,
    oldSpaceFloorsMiB: heapFloors(oldSpace, gcTimes).map(({ floor }) => round(floor / MIB)),
    heapFloorSlopeMiBPerMinute: floors.length >= 2 ? round(slopePerMinute(floors.map(({ gcAt, floorMiB }) => ({ t: gcAt, value: floorMiB })))) : null,
    rssAfterFirstGc: null,
    heapFloor: null,
    plateau: null,
    notJudged: null
  }
  if (firstGcAt === null || floors.length < MIN_MAJOR_GCS || end - firstGcAt < PLATEAU_MIN_SECONDS) {
    verdict.notJudged =
      firstGcAt === null
        ? `no major GC in ${round(end)} s: the heap was still filling`
        : `${gcTimes.length} major GCs, the first at ${round(firstGcAt)} s of ${round(end)} s: too few, or too late, to judge (at least ${MIN_MAJOR_GCS} apart, and ${PLATEAU_MIN_SECONDS} s after the first)`
    return verdict
  }
  const after = rss.filter(({ t }) => t >= firstGcAt).map(({ value }) => value / MIB)
  const third = Math.floor(after.length / 3)
  const middle = median(after.slice(third, 2 * third))
  const last = median(after.slice(2 * third))
  verdict.rssAfterFirstGc = {
    middleThirdMedianMiB: round(middle),
    lastThirdMedianMiB: round(last),
    toleranceMiB: round(RSS_TOLERANCE_MIB(middle)),
    level: last <= middle + RSS_TOLERANCE_MIB(middle)
  }
  const half = Math.floor(floors.length / 2)
  const earlierFloors = floors.slice(0, half).map(({ floorMiB }) => floorMiB)
  const laterFloors = floors.slice(floors.length - half).map(({ floorMiB }) => floorMiB)
  const earlier = Math.min(...earlierFloors)
  const later = Math.min(...laterFloors)
  const oldFloors = verdict.oldSpaceFloorsMiB
  const oldHalf = Math.floor(oldFloors.length / 2)
  verdict.heapFloor = {
    earlierHalfLowestMiB: earlier,
    laterHalfLowestMiB: later,
    toleranceMiB: round(FLOOR_TOLERANCE_MIB(earlier)),
    level: later <= earlier + FLOOR_TOLERANCE_MIB(earlier),
    earlierHalfMedianMiB: round(median(earlierFloors)),
    laterHalfMedianMiB: round(median(laterFloors)),
    oldSpaceEarlierHalfLowestMiB: oldHalf > 0 ? Math.min(...oldFloors.slice(0, oldHalf)) : null,
    oldSpaceLaterHalfLowestMiB: oldHalf > 0 ? Math.min(...oldFloors.slice(oldFloors.length - oldHalf)) : null
  }
  verdict.plateau = verdict.rssAfterFirstGc.level && verdict.heapFloor.level
  return verdict
}

export function median(numbers) {
  const sorted = [...numbers].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/** Least-squares slope of `value` over `t` (seconds), per minute. */
export function slopePerMinute(samples) {
  const n = samples.length
  const meanT = samples.reduce((sum, { t }) => sum + t, 0) / n
  const meanV = samples.reduce((sum, { value }) => sum + value, 0) / n
  let numerator = 0
  let denominator = 0
  for (const { t, value } of samples) {
    numerator += (t - meanT) * (value - meanV)
    denominator += (t - meanT) ** 2
  }
  return denominator === 0 ? 0 : (numerator / denominator) * 60
}

function round(value) {
  return Math.round(value * 10) / 10
}
