import type { YAMLError } from 'yaml'
import { PLACEHOLDER_PATTERN } from './substitute-env.js'

const PLACEHOLDER_HERE = new RegExp(PLACEHOLDER_PATTERN, 'y')

/** What a placeholder found unquoted in a flow collection is told. */
export const QUOTE_THIS_VALUE = 'quote this value: an unquoted ${…} inside { } or [ ] starts a mapping (write "${…}")'

/**
 * Inside a YAML flow collection (`{ … }`, `[ … ]`) an unquoted `${NAME}` is no string: its `{`
 * starts a flow mapping (YAML 1.2.2, 7.4), and the parser then fails at token after token,
 * to the end of the file. SPEC 8's own line `admin: { …, token: ${V4GW_ADMIN_TOKEN:-} }` does
 * that. Each such placeholder is found where the parser first fails on it and blanked out
 * (its length kept, so later errors keep their columns), and the parse goes on to the file's
 * other errors. Returns the text so blanked, and the offset of each placeholder.
 */
export function blankUnquotedPlaceholders(text: string, parseErrors: (text: string) => readonly YAMLError[]): { text: string; placeholders: number[] } {
  let blanked = text
  const placeholders: number[] = []
  for (;;) {
    const found = parseErrors(blanked)
      .map((error) => placeholderAt(blanked, error.pos[0]))
      .find((placeholder) => placeholder !== undefined)
    if (found === undefined) return { text: blanked, placeholders: placeholders.sort((a, b) => a - b) }
    placeholders.push(found.offset)
    blanked = blanked.slice(0, found.offset) + 'x'.repeat(found.length) + blanked.slice(found.offset + found.length)
  }
}

/** A placeholder whose `{` (or `$`) is at `position`, where the parser failed. */
function placeholderAt(text: string, position: number): { offset: number; length: number } | undefined {
  for (const offset of [position - 1, position]) {
    PLACEHOLDER_HERE.lastIndex = offset
    const match = offset >= 0 ? PLACEHOLDER_HERE.exec(text) : null
    if (match !== null) return { offset, length: match[0].length }
  }
  return undefined
}
