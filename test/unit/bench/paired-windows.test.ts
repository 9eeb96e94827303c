import { describe, expect, it } from 'vitest'
// @ts-expect-error -- plain .mjs scripts of the benchmark, without types
import { MEASUREMENT_ORDER } from '../../../bench/candidates.mjs'
// @ts-expect-error -- plain .mjs scripts of the benchmark, without types
import { measurementPlan, pairedRatios, verdict } from '../../../bench/paired-windows.mjs'

type Window = { round: number; seq: number; rps: number }
const order = MEASUREMENT_ORDER as string[]
const plan = measurementPlan as (order: string[], selected: { name: string }[]) => { name: string }[]
const paired = pairedRatios as (samples: Record<string, Window[]>, row: string, partner: string, metric: (window: Window) => number) => number[]
const rps = (window: Window): number => window.rps
type Counted = { failures: number; completed: number }
const judge = verdict as (passes: boolean, value: number, rowNames: string[], samples: Record<string, Counted[]>) => { word: string; note: string }

const REFERENCE = 'fastify-http-proxy-tuned'
/** The goals bench/run.mjs reads (issue 27 against the reference, issue 30 traced against untraced). */
const GOAL_ROWS = ['gateway-native', 'gateway-execute', 'gateway-session-hit', 'gateway-session-hit-redis']

/** The places of `name` in the order. */
const placesOf = (name: string): number[] => order.flatMap((entry, index) => (entry === name ? [index] : []))

describe('bench/paired-windows.mjs: a goal read on windows measured side by side', () => {
  it('measures each goal row right beside a window of the reference', () => {
    for (const row of GOAL_ROWS) {
      const [place] = placesOf(row)
      expect([order[(place as number) - 1], order[(place as number) + 1]], row).toContain(REFERENCE)
    }
  })

  it('measures each traced row within one window of its untraced row', () => {
    for (const [traced, untraced] of [
      ['gateway-native-traced-1pct', 'gateway-native'],
      ['gateway-native-traced-all', 'gateway-native'],
      ['gateway-execute-traced-1pct', 'gateway-execute'],
      ['gateway-execute-traced-all', 'gateway-execute']
    ] as const) {
      expect(Math.abs((placesOf(traced)[0] as number) - (placesOf(untraced)[0] as number)), traced).toBeLessThanOrEqual(2)
    }
  })

  it('restricts the order to the selected rows, measuring a row named twice in a row once', () => {
    const selected = [{ name: REFERENCE }, { name: 'gateway-execute' }]
    expect(plan(order, selected).map((row) => row.name)).toEqual([REFERENCE, 'gateway-execute', REFERENCE])
    expect(plan(order, [{ name: REFERENCE }]).map((row) => row.name)).toEqual([REFERENCE])
  })

  it('pairs each window with the nearest window of its partner in the same round', () => {
    const samples: Record<string, Window[]> = {
      reference: [
        { round: 0, seq: 0, rps: 100 },
        { round: 0, seq: 4, rps: 50 },
        // Round 1 runs in reverse: the row's neighbour is the reference measured after it.
        { round: 1, seq: 1, rps: 80 },
        { round: 1, seq: 9, rps: 10 }
      ],
      row: [
        { round: 0, seq: 3, rps: 100 },
        { round: 1, seq: 2, rps: 160 }
      ]
    }
    expect(paired(samples, 'row', 'reference', rps)).toEqual([2, 2])
  })

  it('reads nothing for a window whose partner was not measured in its round', () => {
    const samples: Record<string, Window[]> = { reference: [{ round: 0, seq: 0, rps: 100 }], row: [{ round: 1, seq: 1, rps: 100 }] }
    expect(paired(samples, 'row', 'reference', rps)).toEqual([])
    expect(paired(samples, 'row', 'missing', rps)).toEqual([])
  })

  it('fails a goal whatever its ratio when a window of the row or of its partner had more than 1 % failed requests', () => {
    const healthy: Counted[] = [{ failures: 0, completed: 10_000 }, { failures: 100, completed: 10_000 }]
    expect(judge(true, 1.3, ['row', 'reference'], { row: healthy, reference: healthy })).toEqual({ word: 'PASS', note: '' })
    expect(judge(false, 1.1, ['row', 'reference'], { row: healthy, reference: healthy }).word).toBe('FAIL')
    // One reference window of fifteen with 10 % non-2xx: its req/s is lower and flatters the row.
    const oneBroken: Counted[] = [...Array.from({ length: 14 }, () => ({ failures: 0, completed: 10_000 })), { failures: 1_000, completed: 10_000 }]
    const judged = judge(true, 1.3, ['row', 'reference'], { row: healthy, reference: oneBroken })
    expect(judged.word).toBe('FAIL')
    expect(judged.note).toContain('reference')
    // A window that answered nothing, and a ratio that is no number.
    expect(judge(true, 1.3, ['row'], { row: [{ failures: 0, completed: 0 }] }).word).toBe('FAIL')
    expect(judge(true, Number.NaN, ['row'], { row: healthy }).word).toBe('FAIL')
  })
})
