import type { Counter } from 'prom-client'

/** One series: its labels (made once, with the series) and its count since the counter last read it. */
interface Cell<L extends string> {
  readonly labels: Record<L, string>
  /** The values it was found by (a copy: the caller's array may be filled again). */
  readonly values: readonly (string | number)[]
  pending: number
}

type Node<L extends string> = Map<string | number, Node<L> | Cell<L>>

/**
 * The per-request increments of a prom-client Counter, counted in plain cells, one per series,
 * and handed to the counter when it is read: from its `collect`, the hook prom-client runs before
 * every scrape and every `get()`. prom-client's `inc` builds a hash string from the label object
 * and validates its names on every call, which a request's counter paid each time; here a
 * series is found by its label values in a tree of Maps, and the counter gets one `inc` per
 * series per scrape. What a scrape shows is the same (a test holds the exposition to per-call
 * `inc`), except across prom-client's `reset()`, which would not clear counts not read yet: the
 * gateway never resets these counters. Its price, measured with bench:compare, is in
 * docs/performance.md.
 */
export class CounterCells<L extends string> {
  private root: Node<L> = new Map()
  private cells: Cell<L>[] = []

  /** `labelNames`: the counter's, in the order `add` gets their values. */
  constructor(private readonly labelNames: readonly L[]) {}

  /**
   * Counts `by` for the series with these label values (in `labelNames` order); a number stands
   * for its decimal text (a status code), so that the caller need not make the string per call.
   * `values` is read at once and not kept: a caller may fill the same array for every call.
   */
  add(values: readonly (string | number)[], by = 1): void {
    // A counter only goes up (prom-client's inc throws on less, which would fail every scrape).
    if (!(by > 0 && Number.isFinite(by))) throw new RangeError(`a counter is added a positive number, not ${by}`)
    this.cellOf(values).pending += by
  }

  /** Hands what was counted to `counter` (call it from the counter's `collect`). */
  flush(counter: Counter<L>): void {
    for (const cell of this.cells) {
      if (cell.pending === 0) continue
      counter.inc(cell.labels, cell.pending)
      cell.pending = 0
    }
  }

  /** How many series have a cell. */
  get series(): number {
    return this.cells.length
  }

  /** Forgets the series `keep` refuses: their counts were flushed, and the counter removed them. */
  retain(keep: (labels: Readonly<Record<L, string>>) => boolean): void {
    const kept = this.cells.filter((cell) => keep(cell.labels))
    this.root = new Map()
    this.cells = []
    // Counts not read yet stay with their series.
    for (const cell of kept) this.cellOf(cell.values).pending += cell.pending
  }

  /** The series' cell, made the first time its values come. */
  private cellOf(values: readonly (string | number)[]): Cell<L> {
    let node = this.root
    const last = this.labelNames.length - 1
    for (let index = 0; index < last; index++) {
      const value = values[index] as string | number
      let next = node.get(value) as Node<L> | undefined
      if (next === undefined) {
        next = new Map()
        node.set(value, next)
      }
      node = next
    }
    const leaf = values[last] as string | number
    let cell = node.get(leaf) as Cell<L> | undefined
    if (cell === undefined) {
      cell = { labels: this.labelsOf(values), values: values.slice(0, this.labelNames.length), pending: 0 }
      node.set(leaf, cell)
      this.cells.push(cell)
    }
    return cell
  }

  private labelsOf(values: readonly (string | number)[]): Record<L, string> {
    const labels = {} as Record<L, string>
    this.labelNames.forEach((name, index) => {
      labels[name] = String(values[index])
    })
    return labels
  }
}
