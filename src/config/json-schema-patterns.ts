/**
 * Pattern sources for config.schema.json, where zod checks with code what a JSON Schema can only
 * say with a regular expression. JSON Schema's dialect is ECMA-262 without flags (Ajv compiles
 * with `u` alone), so a case-insensitive match is spelled out letter by letter.
 */

/** `text` with each letter in either case, unanchored: `http` → `[Hh][Tt][Tt][Pp]`. */
export function anyCase(text: string): string {
  return [...text].map((char) => (char.toLowerCase() === char.toUpperCase() ? escapeForPattern(char) : `[${char.toUpperCase()}${char.toLowerCase()}]`)).join('')
}

function escapeForPattern(char: string): string {
  return /[\\^$.*+?()[\]{}|/]/.test(char) ? `\\${char}` : char
}

/**
 * A string of decimal digits whose value, as `Number()` reads it (leading zeros allowed), is a
 * whole number from `min` to `max`: what the config accepts where a placeholder left a number
 * as text (`"${PORT:-8080}"` becomes "8080").
 */
export function wholeNumberPattern(min: number, max: number): string {
  const low = String(Math.max(0, min))
  const high = String(max)
  if (low.length === high.length) return `^0*(?:${sameLengthRange(low, high).join('|')})$`
  const alternatives = sameLengthRange(low, '9'.repeat(low.length))
  // Every number with more digits than `min` and fewer than `max`.
  if (high.length - low.length > 1) alternatives.push(`[1-9]${repeatDigits(low.length, high.length - 2)}`)
  alternatives.push(...sameLengthRange(`1${'0'.repeat(high.length - 1)}`, high))
  return `^0*(?:${alternatives.join('|')})$`
}

/** Alternatives matching the numbers from `low` to `high`, both written with the same number of digits. */
function sameLengthRange(low: string, high: string): string[] {
  if (low === high) return [low]
  if (low.length === 1) return [digitClass(Number(low), Number(high))]
  const [lowFirst, lowRest] = [low.slice(0, 1), low.slice(1)]
  const [highFirst, highRest] = [high.slice(0, 1), high.slice(1)]
  if (lowFirst === highFirst) return sameLengthRange(lowRest, highRest).map((rest) => lowFirst + rest)
  const restLength = lowRest.length
  const alternatives: string[] = []
  let firstWhole = Number(lowFirst)
  let lastWhole = Number(highFirst)
  if (!/^0*$/.test(lowRest)) {
    alternatives.push(...sameLengthRange(lowRest, '9'.repeat(restLength)).map((rest) => lowFirst + rest))
    firstWhole++
  }
  const highIsPartial = !/^9*$/.test(highRest)
  if (highIsPartial) lastWhole--
  if (firstWhole <= lastWhole) alternatives.push(digitClass(firstWhole, lastWhole) + repeatDigits(restLength, restLength))
  if (highIsPartial) alternatives.push(...sameLengthRange('0'.repeat(restLength), highRest).map((rest) => highFirst + rest))
  return alternatives
}

/** `\d` from `fewest` to `most` times. */
function repeatDigits(fewest: number, most: number): string {
  if (most === 0) return ''
  if (fewest === most) return fewest === 1 ? '\\d' : `\\d{${fewest}}`
  return `\\d{${fewest},${most}}`
}

function digitClass(from: number, to: number): string {
  if (from === to) return String(from)
  return from === 0 && to === 9 ? '\\d' : `[${from}-${to}]`
}
