import type { Attributes, AttributeValue, HrTime, SpanContext, SpanKind } from '@opentelemetry/api'
import type { InstrumentationScope } from '@opentelemetry/core'
import type { Resource } from '@opentelemetry/resources'
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace-base'

/*
 * OTLP's ExportTraceServiceRequest in protobuf (opentelemetry-proto, collector/trace/v1), written
 * by the gateway rather than by @opentelemetry/otlp-transformer's serializer, for speed: that one
 * sizes every message in a first pass and writes each string a character at a time in JS, which
 * made it the largest single cost of a traced request (5.8 µs of the 17.5 µs tracing everything
 * added, docs/performance.md), and at the default ratio it runs too seldom to be compiled. Here
 * short ASCII text and ids are copied byte by byte and longer text by Buffer's native encoder, a
 * gateway's one resource and scope and its attribute keys are encoded once, and a message's
 * length is patched in after it is written. The bytes are the library's, field for field and in
 * its order, for any span the SDK or the gateway makes and for the odd values a hand-made
 * ReadableSpan may hold (odd-length ids, a missing kind, 64-bit counts): a contract test
 * serialises the same spans with both (test/unit/tracing/otlp-protobuf-contract.test.ts). One
 * difference is chosen: a resource or scope is encoded the first time it is seen, so one whose
 * attributes change afterwards (a resource whose asynchronous attributes settle later) keeps its
 * first encoding. The gateway's are made once from its config and never change.
 */

// Protobuf wire types (https://protobuf.dev/programming-guides/encoding/).
const VARINT = 0
const FIXED64 = 1
const LENGTH_DELIMITED = 2
const FIXED32 = 5

// OTLP's span flags (trace/v1/trace.proto SpanFlags): the W3C flags in the low byte, and whether
// the parent was remote.
const HAS_IS_REMOTE = 0x100
const IS_REMOTE = 0x200

/** A batch's scratch space: grown when a batch needs more, and not kept once it is this large. */
const INITIAL_BYTES = 64 * 1024
const KEPT_BYTES = 1024 * 1024

const TWO_32 = 0x1_0000_0000
const TWO_16 = 0x1_0000
const NANOS_PER_SECOND = 1_000_000_000
/** int64's range: an integer attribute inside it is an `int_value`, any other number a `double_value`. */
const INT64_MIN = -(2 ** 63)
const INT64_END = 2 ** 63

/** Text shorter than this is written by the writer itself (and an ASCII one has one byte of length). */
const SHORT_TEXT = 64

/** A hex digit's value by its character code (W3C ids are lowercase; uppercase is read too). */
const HEX_VALUE = new Uint8Array(128)
for (let digit = 0; digit < 16; digit++) {
  HEX_VALUE[digit.toString(16).charCodeAt(0)] = digit
  HEX_VALUE[digit.toString(16).toUpperCase().charCodeAt(0)] = digit
}

/** Bytes a varint of `value` (0 ≤ value < 2^32) takes. */
function varintBytes(value: number): number {
  return value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x20_0000 ? 3 : value < 0x1000_0000 ? 4 : 5
}

/**
 * A protobuf writer over one growing Buffer. A length-delimited message is opened with room
 * for its length guessed, written, and closed: the length is written in front of it then, the
 * body moved when the guess was wrong (rare: the guesses are the usual sizes).
 */
class ProtobufBuffer {
  bytes: Buffer
  at = 0

  constructor(size = INITIAL_BYTES) {
    this.bytes = Buffer.allocUnsafe(size)
  }

  reset(): void {
    if (this.bytes.length > KEPT_BYTES) this.bytes = Buffer.allocUnsafe(INITIAL_BYTES)
    this.at = 0
  }

  /** Room for `count` more bytes. */
  room(count: number): void {
    const needed = this.at + count
    if (needed <= this.bytes.length) return
    let size = this.bytes.length * 2
    while (size < needed) size *= 2
    const larger = Buffer.allocUnsafe(size)
    this.bytes.copy(larger, 0, 0, this.at)
    this.bytes = larger
  }

  tag(field: number, wireType: number): void {
    this.varint32((field << 3) | wireType)
  }

  /** An unsigned 32-bit varint. */
  varint32(value: number): void {
    this.room(5)
    const bytes = this.bytes
    let at = this.at
    while (value > 0x7f) {
      bytes[at++] = (value & 0x7f) | 0x80
      value >>>= 7
    }
    bytes[at++] = value
    this.at = at
  }

  /** An int64 varint: a negative value as its two's complement in ten bytes. */
  varint64(value: number): void {
    if (value >= 0 && value < TWO_32) return this.varint32(value)
    const magnitude = Math.abs(value)
    let low = magnitude >>> 0
    let high = Math.floor(magnitude / TWO_32) >>> 0
    if (value < 0) {
      // Two's complement of the 64-bit magnitude: invert, add one, carry into the high word.
      low = (~low + 1) >>> 0
      high = (~high + (low === 0 ? 1 : 0)) >>> 0
    }
    this.room(10)
    const bytes = this.bytes
    let at = this.at
    while (high !== 0 || low > 0x7f) {
      bytes[at++] = (low & 0x7f) | 0x80
      low = ((low >>> 7) | (high << 25)) >>> 0
      high >>>= 7
    }
    bytes[at++] = low
    this.at = at
  }

  fixed32(value: number): void {
    this.room(4)
    this.at = this.bytes.writeUInt32LE(value >>> 0, this.at)
  }

  /** A time as `fixed64` nanoseconds since the epoch, computed in parts that stay exact doubles. */
  hrTime(time: HrTime): void {
    const [seconds, nanos] = time
    // seconds·10⁹ + nanos = upper·2³² + lower, with seconds split at 2¹⁶ so no product passes 2⁵³.
    // Whole seconds only, as the library takes them (an HrTime's seconds are whole anyway).
    const belowProduct = (seconds & 0xffff) * NANOS_PER_SECOND + nanos
    const aboveProduct = ((seconds / TWO_16) >>> 0) * NANOS_PER_SECOND
    const lower = belowProduct + (aboveProduct % TWO_16) * TWO_16
    this.room(8)
    this.bytes.writeUInt32LE(lower >>> 0, this.at)
    this.bytes.writeUInt32LE((Math.floor(aboveProduct / TWO_16) + Math.floor(lower / TWO_32)) >>> 0, this.at + 4)
    this.at += 8
  }

  double(value: number): void {
    this.room(8)
    this.at = this.bytes.writeDoubleLE(value, this.at)
  }

  /** A string as UTF-8 (a lone surrogate as U+FFFD, as TextEncoder writes it), its length first. */
  string(text: string): void {
    const length = text.length
    // Short ASCII text (most attribute values, names, keys) byte by byte: a call into Buffer's
    // native encoder costs more than the copy for a few dozen characters.
    if (length < SHORT_TEXT) {
      this.room(length + 1)
      const bytes = this.bytes
      const start = this.at + 1
      for (let index = 0; index < length; index++) {
        const code = text.charCodeAt(index)
        if (code > 0x7f) return this.utf8(text)
        bytes[start + index] = code
      }
      bytes[this.at] = length
      this.at = start + length
      return
    }
    this.utf8(text)
  }

  /** Any string, through Buffer's UTF-8 encoder; the length's room guessed for text that is ASCII. */
  private utf8(text: string): void {
    const guess = varintBytes(text.length)
    // At most three bytes per UTF-16 unit.
    this.room(guess + text.length * 3)
    const start = this.at + guess
    const written = this.bytes.write(text, start, 'utf8')
    // The text's end, so that a longer length than guessed finds room after it (lengthBefore).
    this.at = start + written
    this.lengthBefore(start, guess, written)
  }

  /**
   * A whole KeyValue of a short ASCII string, the common attribute, written with its lengths
   * known up front (one byte each) instead of opened and closed. False, with nothing written,
   * when the value is not short ASCII text: the caller writes it the general way.
   */
  shortStringKeyValue(fieldTag: number, encodedKey: Uint8Array, value: string): boolean {
    const length = value.length
    const keyLength = encodedKey.length
    // KeyValue: the key and the value's tag, the value's length, then AnyValue's tag, length and text.
    const keyValueLength = keyLength + 3 + length
    if (keyValueLength > 0x7f || fieldTag > 0x7f) return false
    this.room(keyValueLength + 2)
    const bytes = this.bytes
    let at = this.at + 2
    for (let index = 0; index < keyLength; index++) bytes[at++] = encodedKey[index] as number
    bytes[at++] = length + 2
    bytes[at++] = (1 << 3) | LENGTH_DELIMITED
    bytes[at++] = length
    for (let index = 0; index < length; index++) {
      const code = value.charCodeAt(index)
      if (code > 0x7f) return false
      bytes[at++] = code
    }
    bytes[this.at] = fieldTag
    bytes[this.at + 1] = keyValueLength
    this.at = at
    return true
  }

  /** Lowercase hex ids (W3C Trace Context) as the bytes they spell. */
  hexBytes(hex: string): void {
    const count = hex.length >>> 1
    this.varint32(count)
    this.room(count)
    const bytes = this.bytes
    let at = this.at
    // As the library reads an odd-length id: its whole pairs only.
    for (let index = 0; index + 1 < hex.length; index += 2) bytes[at++] = (HEX_VALUE[hex.charCodeAt(index)] as number) * 16 + (HEX_VALUE[hex.charCodeAt(index + 1)] as number)
    this.at = at
  }

  rawBytes(value: Uint8Array): void {
    this.varint32(value.length)
    this.room(value.length)
    this.bytes.set(value, this.at)
    this.at += value.length
  }

  /** Bytes encoded before: copied one by one when few, as `string` does. */
  append(encoded: Uint8Array): void {
    const length = encoded.length
    this.room(length)
    if (length >= SHORT_TEXT) {
      this.bytes.set(encoded, this.at)
      this.at += length
      return
    }
    const bytes = this.bytes
    let at = this.at
    for (let index = 0; index < length; index++) bytes[at++] = encoded[index] as number
    this.at = at
  }

  /** Opens a length-delimited message; its length is guessed to take `guess` bytes. */
  open(guess: number): number {
    this.room(guess)
    this.at += guess
    return this.at
  }

  close(start: number, guess: number): void {
    this.lengthBefore(start, guess, this.at - start)
  }

  /** Writes `length` into the `guess` bytes before `start`, moving the body when it needs more or fewer. */
  private lengthBefore(start: number, guess: number, length: number): void {
    const size = varintBytes(length)
    if (size !== guess) {
      this.room(size - guess)
      this.bytes.copy(this.bytes, start + size - guess, start, start + length)
    }
    this.at = start - guess
    this.varint32(length)
    this.at += length
  }
}

/**
 * KeyValue.key (tag, length, the key) and the tag of KeyValue.value after it, by key: a gateway's
 * spans use a few dozen keys, so each is encoded once. Bounded, for a span whose keys are not the
 * gateway's (the contract test's).
 */
const ENCODED_KEYS = new Map<string, Uint8Array>()
const MAX_ENCODED_KEYS = 256

function encodedKey(key: string): Uint8Array {
  let encoded = ENCODED_KEYS.get(key)
  if (encoded === undefined) {
    const out = new ProtobufBuffer(key.length * 3 + 8)
    out.tag(1, LENGTH_DELIMITED)
    out.string(key)
    out.tag(2, LENGTH_DELIMITED)
    encoded = out.bytes.subarray(0, out.at)
    if (ENCODED_KEYS.size < MAX_ENCODED_KEYS) ENCODED_KEYS.set(key, encoded)
  }
  return encoded
}

/** Its `for … in` own members, in their order, as the library writes a KeyValue list. */
function attributes(out: ProtobufBuffer, field: number, values: Attributes): void {
  const fieldTag = (field << 3) | LENGTH_DELIMITED
  for (const key in values) {
    if (!Object.hasOwn(values, key)) continue
    const encoded = encodedKey(key)
    const value = values[key]
    if (typeof value === 'string' && out.shortStringKeyValue(fieldTag, encoded, value)) continue
    out.tag(field, LENGTH_DELIMITED)
    const keyValue = out.open(1)
    out.append(encoded)
    const anyValueStart = out.open(1)
    anyValue(out, value)
    out.close(anyValueStart, 1)
    out.close(keyValue, 1)
  }
}

/** common/v1 AnyValue. A value of no OTLP type (undefined, null) is an empty AnyValue. */
function anyValue(out: ProtobufBuffer, value: AttributeValue | Record<string, unknown> | Uint8Array | null | undefined): void {
  switch (typeof value) {
    case 'string':
      out.tag(1, LENGTH_DELIMITED)
      out.string(value)
      return
    case 'boolean':
      out.tag(2, VARINT)
      out.varint32(value ? 1 : 0)
      return
    case 'number':
      if (Number.isInteger(value) && value >= INT64_MIN && value < INT64_END) {
        out.tag(3, VARINT)
        out.varint64(value)
      } else {
        out.tag(4, FIXED64)
        out.double(value)
      }
      return
    case 'object':
      if (value === null) return
      if (value instanceof Uint8Array) {
        out.tag(7, LENGTH_DELIMITED)
        out.rawBytes(value)
      } else if (Array.isArray(value)) {
        out.tag(5, LENGTH_DELIMITED)
        const list = out.open(1)
        for (const item of value as unknown[]) {
          out.tag(1, LENGTH_DELIMITED)
          const element = out.open(1)
          anyValue(out, item as AttributeValue)
          out.close(element, 1)
        }
        out.close(list, 1)
      } else {
        out.tag(6, LENGTH_DELIMITED)
        const list = out.open(1)
        attributes(out, 1, value as Attributes)
        out.close(list, 1)
      }
      return
    default:
      return
  }
}

function spanFlags(context: SpanContext, parentIsRemote: boolean | undefined): number {
  return (context.traceFlags & 0xff) | HAS_IS_REMOTE | (parentIsRemote ? IS_REMOTE : 0)
}

function event(out: ProtobufBuffer, timed: TimedEvent): void {
  const start = out.open(1)
  out.tag(1, FIXED64)
  out.hrTime(timed.time)
  out.tag(2, LENGTH_DELIMITED)
  out.string(timed.name)
  if (timed.attributes !== undefined) attributes(out, 3, timed.attributes)
  out.tag(4, VARINT)
  out.varint64(timed.droppedAttributesCount ?? 0)
  out.close(start, 1)
}

/** trace_id, span_id and trace_state: fields 1 to 3 of both a Span and a Link. */
function contextFields(out: ProtobufBuffer, context: SpanContext): void {
  out.tag(1, LENGTH_DELIMITED)
  out.hexBytes(context.traceId)
  out.tag(2, LENGTH_DELIMITED)
  out.hexBytes(context.spanId)
  const traceState = context.traceState?.serialize()
  if (traceState) {
    out.tag(3, LENGTH_DELIMITED)
    out.string(traceState)
  }
}

function link(out: ProtobufBuffer, linked: ReadableSpan['links'][number]): void {
  const start = out.open(1)
  const context = linked.context
  contextFields(out, context)
  if (linked.attributes !== undefined) attributes(out, 4, linked.attributes)
  out.tag(5, VARINT)
  out.varint64(linked.droppedAttributesCount ?? 0)
  out.tag(6, FIXED32)
  out.fixed32(spanFlags(context, context.isRemote))
  out.close(start, 1)
}

/** trace/v1 Span. Most of the gateway's spans are 128 bytes to 16 KiB: two bytes of length. */
function span(out: ProtobufBuffer, recorded: ReadableSpan): void {
  const start = out.open(2)
  const context = recorded.spanContext()
  const parent = recorded.parentSpanContext
  contextFields(out, context)
  if (parent?.spanId) {
    out.tag(4, LENGTH_DELIMITED)
    out.hexBytes(parent.spanId)
  }
  out.tag(5, LENGTH_DELIMITED)
  out.string(recorded.name)
  // The API's kinds start at INTERNAL = 0; OTLP's at SPAN_KIND_UNSPECIFIED = 0, which is not written.
  const kind = (recorded.kind as SpanKind | undefined | null) == null ? 0 : recorded.kind + 1
  if (kind !== 0) {
    out.tag(6, VARINT)
    out.varint64(kind)
  }
  out.tag(7, FIXED64)
  out.hrTime(recorded.startTime)
  out.tag(8, FIXED64)
  out.hrTime(recorded.endTime)
  attributes(out, 9, recorded.attributes)
  out.tag(10, VARINT)
  out.varint64(recorded.droppedAttributesCount)
  for (const timed of recorded.events) {
    out.tag(11, LENGTH_DELIMITED)
    event(out, timed)
  }
  out.tag(12, VARINT)
  out.varint64(recorded.droppedEventsCount)
  for (const linked of recorded.links) {
    out.tag(13, LENGTH_DELIMITED)
    link(out, linked)
  }
  out.tag(14, VARINT)
  out.varint64(recorded.droppedLinksCount)
  out.tag(15, LENGTH_DELIMITED)
  const status = out.open(1)
  if (recorded.status.message) {
    out.tag(2, LENGTH_DELIMITED)
    out.string(recorded.status.message)
  }
  out.tag(3, VARINT)
  out.varint64(recorded.status.code)
  out.close(status, 1)
  out.tag(16, FIXED32)
  out.fixed32(spanFlags(context, parent?.isRemote))
  out.close(start, 2)
}

/** resource/v1 Resource as ResourceSpans' field 1, tag included. */
function resourceField(out: ProtobufBuffer, resource: Resource): void {
  out.tag(1, LENGTH_DELIMITED)
  const start = out.open(1)
  attributes(out, 1, resource.attributes)
  out.tag(2, VARINT)
  out.varint32(0)
  out.close(start, 1)
}

/** common/v1 InstrumentationScope as ScopeSpans' field 1, tag included. */
function scopeField(out: ProtobufBuffer, scope: InstrumentationScope & { attributes?: Attributes; droppedAttributesCount?: number }): void {
  out.tag(1, LENGTH_DELIMITED)
  const start = out.open(1)
  out.tag(1, LENGTH_DELIMITED)
  out.string(scope.name)
  if (scope.version) {
    out.tag(2, LENGTH_DELIMITED)
    out.string(scope.version)
  }
  if (scope.attributes !== undefined) attributes(out, 3, scope.attributes)
  if (scope.droppedAttributesCount) {
    out.tag(4, VARINT)
    out.varint64(scope.droppedAttributesCount)
  }
  out.close(start, 1)
}

/** Encodes `write`'s output once, for a part every batch repeats (a gateway has one resource and one scope). */
function encodedOnce<Key extends object>(write: (out: ProtobufBuffer, key: Key) => void): (key: Key) => Buffer {
  const encoded = new WeakMap<Key, Buffer>()
  return (key) => {
    let bytes = encoded.get(key)
    if (bytes === undefined) {
      const out = new ProtobufBuffer(1024)
      write(out, key)
      bytes = out.bytes.subarray(0, out.at)
      encoded.set(key, bytes)
    }
    return bytes
  }
}

/** What writes OTLP/HTTP protobuf bodies: one per exporter, its scratch space reused batch after batch. */
export interface SpanEncoder {
  /** The body for a batch of ended spans, written at once. */
  encode(spans: readonly ReadableSpan[]): Uint8Array
  /**
   * The same body, written `spansPerStep` spans at a time: each `next()` writes one step, and the
   * last returns the body. The caller runs other work between steps (tracing/encode-ahead.ts).
   */
  steps(spans: readonly ReadableSpan[], spansPerStep: number): Generator<undefined, Uint8Array, undefined>
}

/**
 * The OTLP/HTTP protobuf body for a batch of ended spans, grouped by resource, then by scope, in
 * the order each first appears (as the library groups them). What it returns is a copy the
 * export may keep (a retry sends it again later). A batch written in steps has the scratch space
 * to itself until it is done; one that starts meanwhile (a flush at shutdown starts every batch at
 * once) gets scratch space of its own.
 */
export function createSpanEncoder(): SpanEncoder {
  let idle: ProtobufBuffer | undefined = new ProtobufBuffer()
  const resourceBytes = encodedOnce(resourceField)
  const scopeBytes = encodedOnce(scopeField)

  function* steps(spans: readonly ReadableSpan[], spansPerStep: number): Generator<undefined, Uint8Array, undefined> {
    const byResource = new Map<Resource, Map<InstrumentationScope, ReadableSpan[]>>()
    for (const recorded of spans) {
      let byScope = byResource.get(recorded.resource)
      if (byScope === undefined) byResource.set(recorded.resource, (byScope = new Map()))
      const group = byScope.get(recorded.instrumentationScope)
      if (group === undefined) byScope.set(recorded.instrumentationScope, [recorded])
      else group.push(recorded)
    }
    // The scratch space is this batch's until it is done: nothing else writes to it between steps.
    const out = idle ?? new ProtobufBuffer()
    idle = undefined
    out.reset()
    try {
      let written = 0
      for (const [resource, byScope] of byResource) {
        // A batch (up to 1,024 spans of a few hundred bytes each) is mostly under 2 MiB: three bytes of length.
        out.tag(1, LENGTH_DELIMITED)
        const resourceSpans = out.open(3)
        out.append(resourceBytes(resource))
        for (const [scope, group] of byScope) {
          out.tag(2, LENGTH_DELIMITED)
          const scopeSpans = out.open(3)
          out.append(scopeBytes(scope))
          for (const recorded of group) {
            if (written === spansPerStep) {
              written = 0
              yield
            }
            out.tag(2, LENGTH_DELIMITED)
            span(out, recorded)
            written++
          }
          if (scope.schemaUrl) {
            out.tag(3, LENGTH_DELIMITED)
            out.string(scope.schemaUrl)
          }
          out.close(scopeSpans, 3)
        }
        if (resource.schemaUrl) {
          out.tag(3, LENGTH_DELIMITED)
          out.string(resource.schemaUrl)
        }
        out.close(resourceSpans, 3)
      }
      return Buffer.from(out.bytes.subarray(0, out.at))
    } finally {
      idle = out
    }
  }

  return {
    encode(spans) {
      const result = steps(spans, Infinity).next()
      return result.value as Uint8Array
    },
    steps
  }
}
