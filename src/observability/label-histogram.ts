import type { Metric, Registry } from 'prom-client'

/** One sample as prom-client's Histogram gives it to the registry (its typings do not describe this). */
interface Sample {
  labels: Record<string, string | number>
  /** The series' own label, which the registry prints after any default label. */
  sharedLabels: Record<string, string>
  value: number
  metricName: string
  exemplar: null | undefined
}

/** What `get()` answers: each sample's labels in one object, as prom-client's Histogram answers. */
type SplayedSample = Omit<Sample, 'labels' | 'sharedLabels'> & { labels: Record<string, string | number> }

interface Exposition<T> {
  name: string
  help: string
  type: 'histogram'
  values: T[]
  aggregator: 'sum'
}

/** One series of a LabelHistogram: its counts per bucket, its sum and its count. */
export class HistogramSeries {
  /** Observations per bucket, not cumulative; the last holds those above every bound. */
  readonly counts: Float64Array
  sum = 0
  count = 0

  constructor(
    private readonly bounds: readonly number[],
    readonly labelValue: string,
    /** Told of the first observation since the series was made or reset: the exposition lists series in that order. */
    private readonly onFirstObservation: (series: HistogramSeries) => void
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
    if (this.count++ === 0) this.onFirstObservation(this)
  }

  reset(): void {
    this.counts.fill(0)
    this.sum = 0
    this.count = 0
  }
}

export interface LabelHistogramOptions {
  name: string
  help: string
  /** The one label, whose values are a small closed set (traffic classes). */
  label: string
  buckets: readonly number[]
  /** Any prom-client registry, whichever exposition format it is set to. */
  registry: Pick<Registry, 'registerMetric'>
}

/**
 * A Prometheus histogram with one label, counted by the gateway and read by prom-client's
 * registry like one of its own: a metric that answers `get()` and `getForPromString()` as
 * prom-client's Histogram does (name, help, type, aggregator, and each series' cumulative
 * `_bucket`s, `+Inf`, `_sum` and `_count`, series in the order first observed since a reset, the
 * label as a shared label), which the registry turns into the exposition.
 *
 * Why not prom-client's Histogram: its `observe` builds a label object, validates and hashes it,
 * and keys the bucket counts by the bound as a string (a number-to-text conversion per call):
 * about 240 ns an observation against 15 here, and each request observes two (docs/performance.md).
 * prom-client has no public way to hand it counts made elsewhere (prometheus/client_js#241), so
 * the metric is the registry's kind rather than the Histogram class. A contract test holds the
 * exposition (with default labels too) and the JSON form to a prom-client Histogram fed the same
 * values, through resets.
 */
export function labelHistogram(options: LabelHistogramOptions): (labelValue: string) => HistogramSeries {
  const { name, help, label, buckets } = options
  const bounds = [...buckets]
  const series = new Map<string, HistogramSeries>()
  /** The series observed since the last reset, in the order of their first observation. */
  let shown: HistogramSeries[] = []
  const show = (one: HistogramSeries): void => {
    shown.push(one)
  }
  const bucketName = `${name}_bucket`

  function getForPromString(): Exposition<Sample> {
    const values: Sample[] = []
    for (const one of shown) {
      const sharedLabels = { [label]: one.labelValue }
      let cumulative = 0
      for (let bucket = 0; bucket < bounds.length; bucket++) {
        cumulative += one.counts[bucket] as number
        values.push({ labels: { le: bounds[bucket] as number }, sharedLabels, value: cumulative, metricName: bucketName, exemplar: null })
      }
      values.push(
        { labels: { le: '+Inf' }, sharedLabels, value: one.count, metricName: bucketName, exemplar: null },
        { labels: {}, sharedLabels, value: one.sum, metricName: `${name}_sum`, exemplar: undefined },
        { labels: {}, sharedLabels, value: one.count, metricName: `${name}_count`, exemplar: undefined }
      )
    }
    return { name, help, type: 'histogram', values, aggregator: 'sum' }
  }

  const metric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    // The registry prefers this for the text exposition, as it does for prom-client's own metrics.
    getForPromString: async (): Promise<Exposition<Sample>> => getForPromString(),
    async get(): Promise<Exposition<SplayedSample>> {
      const exposition = getForPromString()
      return { ...exposition, values: exposition.values.map(({ labels, sharedLabels, ...sample }) => ({ ...sample, labels: { ...labels, ...sharedLabels } })) }
    },
    // As prom-client's Histogram: every series goes, and shows again once observed.
    reset(): void {
      for (const one of shown) one.reset()
      shown = []
    }
  }
  // The registry reads a metric through `name`, `getForPromString()` or `get()`, and `reset()` alone; its type lists only its own classes.
  options.registry.registerMetric(metric as unknown as Metric)
  return (labelValue) => {
    let one = series.get(labelValue)
    if (one === undefined) {
      one = new HistogramSeries(bounds, labelValue, show)
      series.set(labelValue, one)
    }
    return one
  }
}
