/**
 * Numbers of a JSON text as written, where JSON.parse would change them: it turns 1e999 into
 * Infinity, 1e-999 into 0 and rounds a 30-digit integer (SPEC 4 carries fields unchanged, SPEC 6
 * passes answers as they came, SPEC 15 compares them).
 */

// A number JSON.parse may not hold unchanged: 16+ digits (a decimal point among them or not), or an exponent of 3+ digits.
const LOSSY_NUMBER_HINT = /\d(?:\.?\d){15,}|[eE][+-]?\d{3,}/
const NUMBER_OR_STRING = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g
const NUMERAL = /^-?(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/

/** A numeral's magnitude as significant digits and a decimal exponent, so equal values compare equal ("1.50" = "15e-1"). */
function canonicalNumeral(numeral: string): string | undefined {
  const match = NUMERAL.exec(numeral)
  if (match === null) return undefined
  const [, integer = '', fraction = '', exponent = '0'] = match
  const digits = integer + fraction
  const leadingZeros = /^0*/.exec(digits)?.[0].length ?? 0
  const significant = digits.slice(leadingZeros).replace(/0+$/, '')
  return significant === '' ? '0' : `${significant}e${Number(exponent) + integer.length - leadingZeros}`
}

/** The first number in a JSON text that JSON.parse would not keep as written (by value), and where it starts. */
export function firstLossyNumberMatch(text: string): { token: string; offset: number } | undefined {
  if (!LOSSY_NUMBER_HINT.test(text)) return undefined
  for (const match of text.matchAll(NUMBER_OR_STRING)) {
    const token = match[0]
    if (!token.startsWith('"') && canonicalNumeral(token) !== canonicalNumeral(String(Number(token)))) return { token, offset: match.index }
  }
  return undefined
}

/** The first number in a JSON text that JSON.parse would not keep as written (by value), if any. */
export function firstLossyNumber(text: string): string | undefined {
  return firstLossyNumberMatch(text)?.token
}

/** What a number becomes in exactNumbers: a string no JSON text holds by chance (it starts with U+0000). */
const NUMBER_TAG = '\u0000number:'

/**
 * The JSON text with every number written as a string of its exact value (sign, significant digits,
 * exponent): parsed, two numbers are equal exactly when their values are, however written
 * ("1.50" and "15e-1" alike, 12345678901234567890 and …891 not). For comparing texts that hold a
 * number JSON.parse would change.
 */
export function exactNumbers(text: string): string {
  return text.replace(NUMBER_OR_STRING, (token) => {
    if (token.startsWith('"')) return token
    const canonical = canonicalNumeral(token) ?? token
    return JSON.stringify(`${NUMBER_TAG}${token.startsWith('-') && canonical !== '0' ? '-' : ''}${canonical}`)
  })
}
