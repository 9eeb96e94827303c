import { SpanStatusCode, type Attributes, type HrTime, type Link, type SpanContext, type SpanKind, type SpanStatus } from '@opentelemetry/api'
import { hrTime, hrTimeDuration, type InstrumentationScope } from '@opentelemetry/core'
import type { Resource } from '@opentelemetry/resources'
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base'

/** What every span of one gateway carries, and where an ended one goes (tracing.ts makes it once). */
export interface SpanRecorder {
  readonly resource: Resource
  readonly scope: InstrumentationScope
  /** A new span's id, kept with its span beyond its request (trace-ids.ts: W3C, 8 random bytes as hex). */
  newSpanId(): string
  /** Hands an ended span to the export queue (SPEC 17: bounded, drops counted). */
  record(span: ReadableSpan): void
}

/** The limit the gateway gave the SDK's spans (`spanLimits.attributeValueLengthLimit`): a longer string is cut. */
const ATTRIBUTE_VALUE_MAX_CHARS = 1024

/** A string attribute as the SDK records it under the limit above. */
export function attributeText(value: string): string {
  return value.length > ATTRIBUTE_VALUE_MAX_CHARS ? value.slice(0, ATTRIBUTE_VALUE_MAX_CHARS) : value
}

/**
 * Wall clock minus the performance clock now: the SDK's correction of a `performance.now()`
 * time (its span's `_performanceOffset`), taken once per request so that its spans line up.
 */
export function clockOffset(): number {
  return Date.now() - (performance.timeOrigin + performance.now())
}

const NO_EVENTS: TimedEvent[] = []
const NO_LINKS: Link[] = []
const UNSET: SpanStatus = { code: SpanStatusCode.UNSET }
const ERROR: SpanStatus = { code: SpanStatusCode.ERROR }

/** One span's facts as it ends; times are `performance.now()` readings. */
export interface EndedSpanFacts {
  readonly context: SpanContext
  readonly parent: SpanContext | undefined
  readonly kind: SpanKind
  readonly name: string
  readonly attributes: Attributes
  readonly links: Link[] | undefined
  readonly error: boolean
  readonly startedAt: number
  readonly endedAt: number
  /** clockOffset() of the span's request. */
  readonly offset: number
}

/**
 * A span that has ended, as the exporters read one (the SDK's ReadableSpan), made by the gateway
 * rather than by the SDK's tracer: the SDK's span checks every attribute it is given, keeps
 * limits, context and processor hooks, and runs on one request in a hundred at the default ratio,
 * too seldom to be compiled; its price there was several times that of this plain record
 * (docs/performance.md). What it holds is what the SDK's span held for the same calls: a contract
 * test serialises both with the OTLP serializers and compares the bytes.
 */
export class EndedSpan implements ReadableSpan {
  readonly name: string
  readonly kind: SpanKind
  readonly parentSpanContext: SpanContext | undefined
  readonly status: SpanStatus
  readonly attributes: Attributes
  readonly links: Link[]
  readonly resource: Resource
  readonly instrumentationScope: InstrumentationScope
  private readonly context: SpanContext
  /**
   * Start and end in wall-clock milliseconds. The HrTime pairs the exporters read are made when
   * read (at export), not kept: a queued span then holds two numbers instead of three arrays,
   * which each scavenge until the export had to copy (traced-all -1.8 %, docs/performance.md).
   */
  private readonly startedAtMs: number
  private readonly endedAtMs: number

  constructor(recorder: SpanRecorder, facts: EndedSpanFacts) {
    this.context = facts.context
    this.parentSpanContext = facts.parent
    this.kind = facts.kind
    this.name = facts.name
    this.attributes = facts.attributes
    this.links = facts.links ?? NO_LINKS
    this.status = facts.error ? ERROR : UNSET
    this.startedAtMs = facts.startedAt + facts.offset
    // As the SDK does with an end before the start: no negative duration.
    this.endedAtMs = facts.endedAt < facts.startedAt ? this.startedAtMs : facts.endedAt + facts.offset
    this.resource = recorder.resource
    this.instrumentationScope = recorder.scope
  }

  // The same for every span the gateway makes: on the prototype, so a queued span, which each
  // scavenge before its export copies, holds only what differs (traced-all about -1 %).
  get events(): TimedEvent[] {
    return NO_EVENTS
  }

  get ended(): boolean {
    return true
  }

  get droppedAttributesCount(): number {
    return 0
  }

  get droppedEventsCount(): number {
    return 0
  }

  get droppedLinksCount(): number {
    return 0
  }

  get startTime(): HrTime {
    return hrTime(this.startedAtMs)
  }

  get endTime(): HrTime {
    return hrTime(this.endedAtMs)
  }

  get duration(): HrTime {
    return hrTimeDuration(this.startTime, this.endTime)
  }

  spanContext(): SpanContext {
    return this.context
  }
}
