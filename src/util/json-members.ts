/**
 * What a JSON text holds as written, beside what JSON.parse made of it: its member names, at the
 * top and at every depth, counted each time they appear (JSON.parse keeps one value of a repeated
 * name; RFC 8259 4 leaves the choice to the reader), and the top-level ones themselves.
 */
export interface JsonTextMembers {
  /** Members of every object in the text, the top-level one included. */
  readonly all: number
  /** The top-level names as written (their escapes undecoded). */
  readonly topLevelNames: readonly string[]
}

/**
 * The members of a JSON text JSON.parse accepted as an object, or undefined when the text is not
 * as JSON.stringify would write its value but for spacing, member order and string escapes: a
 * number with a fraction or an exponent, or `-0` (`1.0`, `1e2`, `-0` would go out as `1`, `100`,
 * `0`), an integer of 22 digits or more (JSON.stringify writes 10^21 and up with an exponent:
 * `1e+21`), or nesting deeper than `maxDepth`. It reads brackets, commas, the ends of strings and the
 * characters of numbers, nothing else.
 */
export function readJsonTextMembers(text: string, maxDepth: number): JsonTextMembers | undefined {
  let depth = 0
  let all = 0
  const topLevelNames: string[] = []
  // In an object, after `{` or `,`: the next string is a member name.
  let nameNext = false
  // The object (true) or array (false) open at each depth.
  const inObject: boolean[] = []
  // Digits in a row, outside strings.
  let digits = 0
  for (let index = 0; index < text.length; index++) {
    const char = text.charCodeAt(index)
    if (isDigit(char)) {
      if (++digits >= EXPONENT_FROM_DIGITS) return undefined
      continue
    }
    digits = 0
    if (char === QUOTE) {
      const end = closingQuote(text, index)
      if (nameNext) {
        all++
        if (depth === 1) topLevelNames.push(text.slice(index + 1, end))
        nameNext = false
      }
      index = end
    } else if (char === OPEN_BRACE || char === OPEN_BRACKET) {
      if (++depth > maxDepth) return undefined
      inObject[depth] = char === OPEN_BRACE
      nameNext = char === OPEN_BRACE
    } else if (char === CLOSE_BRACE || char === CLOSE_BRACKET) {
      depth--
      nameNext = false
    } else if (char === COMMA) {
      nameNext = inObject[depth] === true
    } else if (char === DOT || char === UPPER_E || (char === LOWER_E && isDigit(text.charCodeAt(index - 1)))) {
      // Outside strings a dot or an exponent is a number's; the `e` of true and false follows a letter.
      return undefined
    } else if (char === MINUS && text.charCodeAt(index + 1) === ZERO && !isDigit(text.charCodeAt(index + 2))) {
      return undefined
    }
  }
  return { all, topLevelNames }
}

/** How many members the objects of a parsed JSON value hold, at every depth. */
export function parsedMemberCount(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0
  let count = 0
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) count += parsedMemberCount(value[index])
    return count
  }
  // for-in: JSON.parse makes plain objects, whose own names are all it enumerates, "__proto__" included.
  for (const name in value) count += 1 + parsedMemberCount((value as Record<string, unknown>)[name])
  return count
}

/** Integers from 10^21 (22 digits) on are written by JSON.stringify with an exponent. */
const EXPONENT_FROM_DIGITS = 22

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const DOT = 0x2e
const MINUS = 0x2d
const ZERO = 0x30
const NINE = 0x39
const LOWER_E = 0x65
const UPPER_E = 0x45
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d

function isDigit(char: number): boolean {
  return char >= ZERO && char <= NINE
}

/** The index of the quote that closes the string opening at `start`: the next one not escaped by an odd run of backslashes. */
function closingQuote(text: string, start: number): number {
  let at = text.indexOf('"', start + 1)
  while (at !== -1) {
    let backslashes = 0
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++
    if (backslashes % 2 === 0) return at
    at = text.indexOf('"', at + 1)
  }
  return text.length
}
