import type { Metric, Registry } from 'prom-client'

/** One sample as prom-client's own metrics give it from `get()` (its typings do not describe this). */
interface Sample {
  value: number
  metricName: string
  exemplar: null | undefined
  labels: Record<string, string | number>
}

/** One series of a LabelHistogram: its counts per bucket, its sum and its count. */
export class HistogramSeries {
  /** Observations per bucket, not cumulative; the last holds those above every bound. */
  readonly counts: Float64Array
  sum = 0
  count = 0

  constructor(
    private readonly bounds: readonly number[],
    readonly labelValue: string
  ) {
    this.counts = new Float64Array(bounds.length + 1)
  }

  observe(value: number): void {
    // prom-client refuses such a value as it is observed, with this error.
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`)
    const bounds = this.bounds
    // The first bucket whose upper bound holds the value (`le`: less than or equal).
    let bucket = 0
    while (bucket < bounds.length && value > (bounds[bucket] as number)) bucket++
    this.counts[bucket]!++
    // Added in the order observed, as prom-client adds them: the same sum to the last bit.
    this.sum += value
    this.count++
  }
}

export interface LabelHistogramOptions {
  name: string
  help: string
  /** The one label, whose values are a small closed set (traffic classes). */
  label: string
  buckets: readonly number[]
  registry: Registry
}

/**
 * A Prometheus histogram with one label, counted by the gateway and read by prom-client's
 * registry like one of its own: a metric whose `get()` answers what prom-client's Histogram
 * answers (name, help, type, aggregator, and each series' cumulative `_bucket`s, `+Inf`, `_sum`
 * and `_count`), which the registry turns into the exposition.
 *
 * Why not prom-client's Histogram: its `observe` builds a label object, validates and hashes it,
 * and keys the bucket counts by the bound as a string (a number-to-text conversion per call):
 * about 240 ns an observation against 15 here, and each request observes two (docs/performance.md).
 * prom-client has no public way to hand it counts made elsewhere (prometheus/client_js#241), so
 * the metric is the registry's kind rather than the Histogram class. A contract test holds the
 * exposition and the JSON form to a prom-client Histogram fed the same values, value for value.
 */
export function labelHistogram(options: LabelHistogramOptions): (labelValue: string) => HistogramSeries {
  const { name, help, label, buckets } = options
  const bounds = [...buckets]
  const series = new Map<string, HistogramSeries>()
  const bucketName = `${name}_bucket`
  const metric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    // As prom-client's Histogram: a series shows once observed, a reset hides it until observed again.
    async get(): Promise<{ name: string; help: string; type: 'histogram'; values: Sample[]; aggregator: 'sum' }> {
      const values: Sample[] = []
      for (const one of series.values()) {
        if (one.count === 0) continue
        let cumulative = 0
        for (let bucket = 0; bucket < bounds.length; bucket++) {
          cumulative += one.counts[bucket] as number
          values.push({ value: cumulative, metricName: bucketName, exemplar: null, labels: { le: bounds[bucket] as number, [label]: one.labelValue } })
        }
        values.push(
          { value: one.count, metricName: bucketName, exemplar: null, labels: { le: '+Inf', [label]: one.labelValue } },
          { value: one.sum, metricName: `${name}_sum`, exemplar: undefined, labels: { [label]: one.labelValue } },
          { value: one.count, metricName: `${name}_count`, exemplar: undefined, labels: { [label]: one.labelValue } }
        )
      }
      return { name, help, type: 'histogram', values, aggregator: 'sum' }
    },
    reset(): void {
      for (const one of series.values()) {
        one.counts.fill(0)
        one.sum = 0
        one.count = 0
      }
    }
  }
  // The registry reads a metric through `name`, `get()` and `reset()` alone; its type lists only its own classes.
  options.registry.registerMetric(metric as unknown as Metric)
  return (labelValue) => {
    let one = series.get(labelValue)
    if (one === undefined) {
      one = new HistogramSeries(bounds, labelValue)
      series.set(labelValue, one)
    }
    return one
  }
}
