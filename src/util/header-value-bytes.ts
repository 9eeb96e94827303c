import { isUtf8 } from 'node:buffer'

/**
 * Node's HTTP parser gives each byte of a header value as one character (latin1). A value sent as
 * UTF-8 outside ASCII is therefore held as its bytes, one character each; an ASCII value is the
 * same either way, and needs no conversion.
 */
const NOT_ASCII = /[\u0080-\uffff]/

/** The bytes a header value was sent as: the string itself when ASCII (its characters are its bytes). */
export function headerValueBytes(value: string): string | Buffer {
  return NOT_ASCII.test(value) ? Buffer.from(value, 'latin1') : value
}

/** A value given as text, as the listener holds it from a client that sends it as UTF-8. */
export function asReceivedHeaderValue(text: string): string {
  return NOT_ASCII.test(text) ? Buffer.from(text, 'utf8').toString('latin1') : text
}

/**
 * A header value as the text its client sent (a user agent shown in SPEC 12's reports): its
 * bytes read as UTF-8 when they are UTF-8, else as ISO-8859-1 (RFC 9110 5.5's historical
 * charset, which is how Node holds them); an ASCII value as it is.
 */
export function headerValueText(value: string): string {
  if (!NOT_ASCII.test(value)) return value
  const bytes = Buffer.from(value, 'latin1')
  return isUtf8(bytes) ? bytes.toString('utf8') : value
}
