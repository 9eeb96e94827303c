import type { Metric, Registry } from 'prom-client'

/** One sample line of the exposition, as prom-client's registry renders it. */
interface Sample {
  metricName: string
  labels: Record<string, string>
  value: number
}

interface Series {
  /** Observations per bucket (not cumulative); the last slot is +Inf. */
  readonly counts: Float64Array
  sum: number
  count: number
}

/**
 * A Prometheus histogram with one label whose `observe` is a bucket search and three additions.
 * prom-client's own Histogram validates and hashes the labels and looks the bucket up by a
 * float key on every observation, which cost more than the rest of a request's metrics
 * together. This one is rendered by the same registry, in the same exposition format.
 */
export class LabelledHistogram {
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  private readonly series = new Map<string, Series>()
  private readonly bounds: Float64Array
  private readonly boundLabels: string[]

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly labelName: string,
    buckets: readonly number[],
    registry: Registry
  ) {
    this.bounds = Float64Array.from([...buckets].sort((a, b) => a - b))
    this.boundLabels = [...this.bounds].map(String)
    // prom-client's registry renders any object with this shape; its typings only name its own classes.
    registry.registerMetric(this as unknown as Metric)
  }

  observe(labelValue: string, value: number): void {
    let series = this.series.get(labelValue)
    if (series === undefined) {
      series = { counts: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 }
      this.series.set(labelValue, series)
    }
    const bounds = this.bounds
    let bucket = 0
    while (bucket < bounds.length && value > (bounds[bucket] as number)) bucket++
    series.counts[bucket]! += 1
    series.sum += value
    series.count += 1
  }

  /** What prom-client's registry reads at scrape time: the same shape its own Histogram gives. */
  get(): Promise<{ name: string; help: string; type: 'histogram'; values: Sample[]; aggregator: 'sum' }> {
    const values: Sample[] = []
    for (const [labelValue, series] of this.series) {
      let cumulative = 0
      for (let bucket = 0; bucket <= this.bounds.length; bucket++) {
        cumulative += series.counts[bucket] as number
        const le = bucket === this.bounds.length ? '+Inf' : (this.boundLabels[bucket] as string)
        values.push({ metricName: `${this.name}_bucket`, labels: { le, [this.labelName]: labelValue }, value: cumulative })
      }
      values.push({ metricName: `${this.name}_sum`, labels: { [this.labelName]: labelValue }, value: series.sum })
      values.push({ metricName: `${this.name}_count`, labels: { [this.labelName]: labelValue }, value: series.count })
    }
    return Promise.resolve({ name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' })
  }

  reset(): void {
    this.series.clear()
  }
}
