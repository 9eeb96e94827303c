import { describe, expect, it } from 'vitest'
// @ts-expect-error -- a plain .mjs script of the benchmark, without types
import { plotTimeSeries } from '../../../bench/ascii-plot.mjs'

type Plot = (options: {
  series: { symbol: string; samples: { t: number; value: number }[] }[]
  events?: { t: number; symbol: string }[]
  xMax: number
  yMax: number
  width?: number
  height?: number
}) => string[]
const plot = plotTimeSeries as Plot

/** The plot area's cells, top row first, without the value labels. */
function cells(lines: string[], height: number): string[] {
  return lines.slice(0, height).map((line) => line.slice(line.indexOf('|') + 1))
}

/*
 * docs/soak.md shows the soak's RSS as this chart: a band that stays level is a plateau, a band
 * that climbs is growth. The value axis starts at zero, so the chart never makes a small rise look
 * steep.
 */
describe('bench/ascii-plot.mjs', () => {
  it('fills each column from its least to its greatest sample, on a value axis from zero', () => {
    // 4 columns of 1 s, 4 rows of 25: column 0 holds 10 and 60 (rows 0-2), column 2 holds 80 (row 3).
    const lines = plot({ series: [{ symbol: '#', samples: [{ t: 0.2, value: 10 }, { t: 0.7, value: 60 }, { t: 2.5, value: 80 }] }], xMax: 4, yMax: 100, width: 4, height: 4 })
    expect(cells(lines, 4)).toEqual(['  # ', '#   ', '#   ', '#   '])
    expect(lines[0]).toMatch(/^ {3} \|/)
    expect(lines[3]).toMatch(/^ {2}0 \|/)
    expect(lines[1]).toMatch(/^ 50 \|/)
  })

  it('draws a level series as one band and a climbing one as a rising line', () => {
    const width = 10
    const level = Array.from({ length: 100 }, (_, index) => ({ t: index / 10, value: 150 + (index % 5) }))
    const rising = Array.from({ length: 100 }, (_, index) => ({ t: index / 10, value: 20 + index * 2 }))
    const flat = cells(plot({ series: [{ symbol: '#', samples: level }], xMax: 10, yMax: 250, width, height: 10 }), 10)
    expect(flat.filter((row) => row.includes('#'))).toEqual(['#'.repeat(width)])
    const climbing = cells(plot({ series: [{ symbol: '#', samples: rising }], xMax: 10, yMax: 250, width, height: 10 }), 10)
    const topRowOfColumn = (column: number): number => climbing.findIndex((row) => row[column] === '#')
    expect(topRowOfColumn(0)).toBeGreaterThan(topRowOfColumn(width - 1))
  })

  it('draws a later series over an earlier one and marks events on the time axis', () => {
    const lines = plot({
      series: [
        { symbol: '#', samples: [{ t: 0, value: 30 }, { t: 5, value: 30 }] },
        { symbol: '+', samples: [{ t: 5, value: 30 }, { t: 9.9, value: 30 }] }
      ],
      events: [{ t: 3, symbol: 'R' }, { t: 5, symbol: '^' }],
      xMax: 10,
      yMax: 100,
      width: 10,
      height: 2
    })
    expect(cells(lines, 2)).toEqual(['          ', '#    +   +'])
    expect(lines[2]).toBe('    +---R-^----')
    expect(lines[3]).toMatch(/^ {5}0 s/)
  })

  it('labels the time axis in minutes for a run of two minutes or more', () => {
    const lines = plot({ series: [], xMax: 600, yMax: 100, width: 72, height: 2 })
    expect(lines[3]).toMatch(/^ {5}0 min {2,}2 min {2,}4 min/)
  })
})
