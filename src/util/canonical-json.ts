/**
 * RFC 8785 (JSON Canonicalization Scheme) of a value JSON.parse made: object members sorted by
 * their names' UTF-16 code units (3.2.3), no whitespace, strings and numbers as ECMAScript's
 * JSON.stringify writes them (3.2.2.2, 3.2.2.3, which RFC 8785 adopts). Recursive: a value
 * nested too deeply throws a RangeError, as JSON.stringify does.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null'
  if (Array.isArray(value)) return `[${value.map((item: unknown) => canonicalJson(item)).join(',')}]`
  const record = value as Record<string, unknown>
  // Array.prototype.sort without a comparator compares UTF-16 code units, as 3.2.3 asks.
  const names = Object.keys(record)
    .filter((name) => record[name] !== undefined)
    .sort()
  return `{${names.map((name) => `${JSON.stringify(name)}:${canonicalJson(record[name])}`).join(',')}}`
}
