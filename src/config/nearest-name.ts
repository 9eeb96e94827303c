/**
 * The known name nearest to `name`, if one is near enough to be what was meant: at most one edit
 * (a letter added, dropped, changed or two swapped) for every three letters, and letter case is
 * free (`upstreamTimeout` → `upstreamTimeoutMs`, `listn` → `listen`, `maxinflight` → `maxInFlight`).
 */
export function nearestName(name: string, known: readonly string[]): string | undefined {
  let nearest: string | undefined
  let nearestDistance = Number.POSITIVE_INFINITY
  for (const candidate of known) {
    const distance = editDistance(name.toLowerCase(), candidate.toLowerCase())
    if (distance < nearestDistance && distance <= Math.max(1, Math.floor(Math.max(name.length, candidate.length) / 3))) {
      nearest = candidate
      nearestDistance = distance
    }
  }
  return nearest
}

/** Edits from `a` to `b`, a swap of two neighbouring letters counting as one (optimal string alignment). */
function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_row, i) => Array.from({ length: b.length + 1 }, (_cell, j) => (i === 0 ? j : j === 0 ? i : 0)))
  const at = (i: number, j: number): number => rows[i]?.[j] ?? Number.POSITIVE_INFINITY
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1)
      ;(rows[i] as number[])[j] = best
    }
  }
  return at(a.length, b.length)
}
