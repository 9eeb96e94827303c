// An ASCII chart of sampled values over time, for reports that are read as text (docs/soak.md):
// each column covers an equal slice of time and is filled from the least to the greatest sample
// that slice holds, so a GC sawtooth shows as a band and growth as a band that climbs. The value
// axis starts at zero, so a rise is drawn at its true size.

/**
 * @param {object} options
 * @param {{ symbol: string, samples: { t: number, value: number }[] }[]} options.series drawn in order; a later one overwrites
 * @param {{ t: number, symbol: string }[]} [options.events] marked on the time axis
 * @param {number} options.xMax the time the axis ends at (seconds); it starts at 0
 * @param {number} options.yMax the value the axis ends at; it starts at 0
 * @param {number} [options.width] columns of the plot area
 * @param {number} [options.height] rows of the plot area
 * @returns {string[]} the lines, without a trailing newline
 */
export function plotTimeSeries({ series, events = [], xMax, yMax, width = 72, height = 10 }) {
  const rowSize = yMax / height
  const columnSeconds = xMax / width
  const grid = Array.from({ length: height }, () => Array.from({ length: width }, () => ' '))
  const column = (t) => Math.min(width - 1, Math.max(0, Math.floor(t / columnSeconds)))
  const row = (value) => Math.min(height - 1, Math.max(0, Math.floor(value / rowSize)))
  for (const { symbol, samples } of series) {
    const ranges = new Map()
    for (const { t, value } of samples) {
      const c = column(t)
      const range = ranges.get(c)
      if (range === undefined) ranges.set(c, { low: value, high: value })
      else {
        range.low = Math.min(range.low, value)
        range.high = Math.max(range.high, value)
      }
    }
    for (const [c, { low, high }] of ranges) {
      for (let r = row(low); r <= row(high); r++) grid[r][c] = symbol
    }
  }
  const labelWidth = Math.max(String(Math.round(yMax)).length, 3)
  const lines = []
  for (let r = height - 1; r >= 0; r--) {
    // Every other row is labelled with the value its cells start at.
    const label = r % 2 === 0 ? String(Math.round(r * rowSize)).padStart(labelWidth) : ' '.repeat(labelWidth)
    lines.push(`${label} |${grid[r].join('')}`)
  }
  const axis = Array.from({ length: width }, () => '-')
  for (const { t, symbol } of events) axis[column(t)] = symbol
  lines.push(`${' '.repeat(labelWidth)} +${axis.join('')}`)
  lines.push(`${' '.repeat(labelWidth)}  ${timeLabels(xMax, width)}`)
  return lines
}

/** Labels under the time axis: minutes for a run of two minutes or more, else seconds, about every 12 columns. */
function timeLabels(xMax, width) {
  const inMinutes = xMax >= 120
  const unit = inMinutes ? 60 : 1
  const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600]
  const step = steps.find((candidate) => (candidate * unit * width) / xMax >= 12) ?? steps[steps.length - 1]
  const line = Array.from({ length: width + 8 }, () => ' ')
  for (let value = 0; value * unit <= xMax; value += step) {
    const text = `${value}${inMinutes ? ' min' : ' s'}`
    const at = Math.min(width - 1, Math.round((value * unit * width) / xMax))
    if (line.slice(at, at + text.length + 1).some((char) => char !== ' ')) continue
    for (let i = 0; i < text.length; i++) line[at + i] = text[i]
  }
  return line.join('').trimEnd()
}
