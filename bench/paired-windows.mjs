// How `npm run bench` (run.mjs) pairs windows for its goals: a goal is a ratio of two rows, read
// within each round on windows measured side by side (MEASUREMENT_ORDER in candidates.mjs), so
// that the machine's drift between windows a minute apart does not enter it.

/**
 * The rows of one round, in `order` (names, a row possibly named more than once) restricted to
 * `selected` (candidate objects): a row that would be measured twice in a row is measured once.
 */
export function measurementPlan(order, selected) {
  return order
    .map((name) => selected.find((candidate) => candidate.name === name))
    .filter((candidate) => candidate !== undefined)
    .filter((candidate, index, plan) => index === 0 || plan[index - 1] !== candidate)
}

/**
 * Each window of `row` over the window of `partner` measured nearest to it in the same round, as
 * `metric` reads them. A window is `{ round, seq, ... }`: its round and its place in that round.
 */
export function pairedRatios(samples, row, partner, metric) {
  return (samples[row] ?? []).flatMap((sample) => {
    let nearest
    for (const other of samples[partner] ?? []) {
      if (other.round !== sample.round) continue
      if (nearest === undefined || Math.abs(other.seq - sample.seq) < Math.abs(nearest.seq - sample.seq)) nearest = other
    }
    return nearest === undefined ? [] : [metric(sample) / metric(nearest)]
  })
}

/** A window whose numbers describe something broken: nothing answered, or more than 1% of requests failed. */
export function isBrokenWindow(sample) {
  return sample.completed === 0 || sample.failures > sample.completed * 0.01
}

/**
 * A goal's verdict on the windows of `rowNames`: FAIL, whatever the ratio, when a window of one of
 * them had failures (a reference window with failed requests reads fewer req/s and flatters the
 * gateway), or when the ratio is no number (a window with no answer).
 */
export function verdict(passes, value, rowNames, samples) {
  const broken = rowNames.filter((name) => (samples[name] ?? []).some(isBrokenWindow))
  if (broken.length > 0) return { word: 'FAIL', note: ` [more than 1% of requests failed in a window of ${broken.join(', ')}: not a measurement]` }
  return { word: Number.isFinite(value) && passes ? 'PASS' : 'FAIL', note: '' }
}
