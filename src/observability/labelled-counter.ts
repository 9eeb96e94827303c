import type { Metric, Registry } from 'prom-client'

interface Series {
  readonly labels: Record<string, string>
  value: number
}

/**
 * A Prometheus counter whose series are found by a key the caller builds, so that `inc` is a
 * map lookup and an addition. prom-client's own Counter validates and hashes the label object
 * on every increment, its bound `labels()` children included. Rendered by the same registry,
 * in the same exposition format, as LabelledHistogram is.
 */
export class LabelledCounter {
  readonly type = 'counter'
  readonly aggregator = 'sum'
  private readonly series = new Map<string, Series>()

  constructor(
    readonly name: string,
    readonly help: string,
    registry: Registry
  ) {
    // prom-client's registry renders any object with this shape; its typings only name its own classes.
    registry.registerMetric(this as unknown as Metric)
  }

  /**
   * Adds one to the series `key` stands for. `labels` makes its label set the first time the key
   * is seen; the caller keeps keys and label sets one to one, and both bounded.
   */
  inc(key: string, labels: () => Record<string, string>): void {
    const series = this.series.get(key)
    if (series === undefined) this.series.set(key, { labels: labels(), value: 1 })
    else series.value += 1
  }

  /** What prom-client's registry reads at scrape time: the same shape its own Counter gives. */
  get(): Promise<{ name: string; help: string; type: 'counter'; values: Series[]; aggregator: 'sum' }> {
    return Promise.resolve({ name: this.name, help: this.help, type: 'counter', values: [...this.series.values()], aggregator: 'sum' })
  }

  reset(): void {
    this.series.clear()
  }
}
