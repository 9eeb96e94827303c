/**
 * How many members the top-level object of a JSON text has as written, counting a repeated name
 * each time (JSON.parse keeps only its last value, RFC 8259 4 leaves the choice to the reader);
 * -1 when it nests deeper than `maxDepth`. For a text JSON.parse accepted as an object: it reads
 * brackets, commas and where strings start and end, nothing else.
 */
export function topLevelMemberCount(text: string, maxDepth: number): number {
  let depth = 0
  let members = 0
  // In the top-level object, after `{` or `,`: the next string is a member name.
  let nameNext = false
  for (let index = 0; index < text.length; index++) {
    const char = text.charCodeAt(index)
    if (char === QUOTE) {
      if (depth === 1 && nameNext) {
        members++
        nameNext = false
      }
      index = closingQuote(text, index)
    } else if (char === OPEN_BRACE || char === OPEN_BRACKET) {
      if (++depth > maxDepth) return -1
      if (depth === 1) nameNext = true
    } else if (char === CLOSE_BRACE || char === CLOSE_BRACKET) {
      depth--
    } else if (char === COMMA && depth === 1) {
      nameNext = true
    }
  }
  return members
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const COMMA = 0x2c
const OPEN_BRACE = 0x7b
const CLOSE_BRACE = 0x7d
const OPEN_BRACKET = 0x5b
const CLOSE_BRACKET = 0x5d

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
